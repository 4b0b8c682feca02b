"""Reading modules: from HLO text, HLO protos, StableHLO text and bytecode, as a :class:`LoadedProgram`.

HLO is pre-checked (:mod:`.hlo_check`), parsed by XLA, imported as StableHLO and verified;
bytecode this process did not write itself is decoded in a child process first. What comes back
is an :class:`~xlasdk.XlaComputation`'s parts (name, program shape, origin): the program model
(``XlaComputation.from_hlo_text`` ...) and :mod:`.load` (``computation_from_*``,
``load_computation``) make the computation of them, so this module sits below the program model.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any, NamedTuple

from .._atomic import file_path, read_regular_file
from .._jaxlib import isolated
from .._jaxlib import mlir as _mlir
from .._jaxlib.opset import newer_op_hint
from ..errors import FormatError
from ..program.diagnostics import _one_line
from ..program.origin import Loaded, LoadedHlo
from ..program.program_shape import _program_shape
from . import untrusted
from .artifact import _TRUSTED_BYTECODE, _vtuple, portable_artifact_version
from .hlo_check import check_elided_constants, check_hlo_text
from .hlo_names import hlo_names
from .hlo_rewrite import _backported_hlo_text
from .protobuf import _find_module_proto
from .sniff import (
    _BYTECODE_MAGIC,
    Format,
    PathLike,
    _as_text,
    _strip_leading_comments,
    jax_exported_hint,
    sniff_format,
)

if TYPE_CHECKING:
    from ..program.origin import Origin
    from ..shape import ProgramShape


class LoadedProgram(NamedTuple):
    """A module read from one of XLA's formats: the parts of its :class:`~xlasdk.XlaComputation`,
    which is ``XlaComputation(*program)``."""

    name: str
    program_shape: ProgramShape
    origin: Origin


def _loaded(module: Any, what: str, *, fmt: Format) -> LoadedProgram:
    program_shape = _program_shape(module, what)
    mname = _mlir.module_name(module) or "main"
    text = _mlir.module_to_text(module, debug_info=True, generic=True)  # the pretty form may not parse back
    return LoadedProgram(mname, program_shape, Loaded(fmt.value, text, module))


def _hlo_failure(e: isolated.Failed, what: str, text: str | None) -> FormatError:
    """The FormatError for an HLO module the worker could not load (after the Python pre-check,
    which names the line and instruction of the faults it knows, has had its say)."""
    if text is not None and e.stage != "tpu":  # the pre-check knows nothing of TPU layouts
        check_hlo_text(text, what)
    if e.stage == "syntax":
        return FormatError(f"{what}: HLO syntax error: {e.message}{newer_op_hint(e.message)}")
    if e.stage == "proto":
        return FormatError(f"{what}: corrupt HloModuleProto: {e.message}")
    if e.stage == "rewrite":
        return FormatError(f"{what}: cannot import the optimized HLO: {e.message}")
    if e.stage == "import":
        return FormatError(f"{what}: XLA could not import the HLO module: {e.message}")
    if e.stage == "format":
        return FormatError(e.message)
    if e.stage == "tpu":
        return FormatError(f"{what}: TPU-optimized module (XLA's after_optimizations HLO for a TPU) without a CPU "
                           f"meaning: {_with_line(e.message, text)}; load the program's before_optimizations file "
                           "(module.before_optimizations.txt / .hlo.pb) to run it off the TPU")
    if e.stage.startswith("verify") and text is not None and _tpu_signs(text):
        return FormatError(f"{what}: TPU-optimized module (XLA's after_optimizations HLO for a TPU) whose CPU meaning "
                           f"does not verify: {_with_line(e.message, text)} (a form of XLA's TPU HLO that xlasdk does "
                           "not rewrite yet); load the program's before_optimizations file (module.before_optimizations"
                           ".txt / .hlo.pb) to run it off the TPU")
    if e.stage.startswith("verify"):
        return FormatError(f"{what}: the module is inconsistent: {_with_line(e.message, text)}")
    if e.stage == "rule":
        return FormatError(f"{what}: {_with_line(e.message, text)}")
    return FormatError(f"{what}: cannot load the HLO module: {e.message}")


def _with_line(message: str, text: str | None) -> str:
    """``instruction 'add.3': ...`` with the HLO line of that instruction, when the text has it."""
    m = re.match(r"instruction '([^']+)'[: ]", message)
    if m is None or text is None:
        return message
    name = re.escape(m.group(1))
    found = re.search(rf"^[ \t]*(?:ROOT[ \t]+)?%?{name}[ \t]*=", text, re.MULTILINE)
    if found is None:
        return message
    return f"line {text.count(chr(10), 0, found.start()) + 1}: {message}"


def _tpu_signs(text: str) -> bool:
    """Whether ``text`` reads as XLA's TPU-optimized HLO (:func:`.tpu_meaning.tpu_signs`)."""
    from .tpu_meaning import tpu_signs

    try:
        return bool(tpu_signs(text))
    except Exception:  # noqa: BLE001 - a text it cannot read is not called a TPU module
        return False


def _from_hlo(kind: str, data: str | bytes, what: str, fmt: Format) -> LoadedProgram:
    """Load HLO text or proto bytes: every native step runs first in the worker process."""
    text = data if isinstance(data, str) else None
    try:
        proto, bytecode, name, program_shape, attributes, tpu = untrusted.load_hlo(kind, data, what)
    except isolated.Failed as e:
        raise _hlo_failure(e, what, text) from None
    except FormatError:  # the worker died: the pre-check may know why, with a line number
        if text is not None:
            check_hlo_text(text, what)
        raise
    # The worker carried these exact bytes through every step the computation will take with
    # them here (parse, verify); they are read when first needed, and the worker goes first for
    # the rest (the module's text, XLA's proto reader) when that is needed.
    origin = LoadedHlo(  # its instruction graph names instructions as the HLO does (read_names)
        fmt.value, proto, (bytecode, attributes), read_names=hlo_names, tpu_rewrite=tpu,
    )
    return LoadedProgram(name, program_shape, origin)


def hlo_text_program(text: str, what: str) -> LoadedProgram:
    """HLO text (``HloModule ...``) read (:func:`xlasdk.formats.computation_from_hlo_text`)."""
    if not isinstance(text, str):
        raise FormatError(f"{what}: expected HLO text (str), got {type(text).__name__}")
    if not text.strip():
        raise FormatError(f"{what}: the HLO text is empty")
    head = _strip_leading_comments(text)
    if not head.startswith("HloModule"):
        found = sniff_format(text.encode("utf-8", "replace"))
        hint = f" (it looks like {found.description})" if found not in (None, Format.HLO_TEXT) else ""
        raise FormatError(f"{what}: not HLO text: it does not start with 'HloModule'{hint}")
    check_elided_constants(text, what)
    if not _mlir.HLO_TEXT_TUPLE_OPERAND_REFS:  # text of a newer XLA (jaxlib 0.12's dumps) for an older parser
        text = _backported_hlo_text(text) or text
    return _from_hlo("text", text, what, Format.HLO_TEXT)


def hlo_proto_program(data: bytes, what: str) -> LoadedProgram:
    """A serialized ``HloModuleProto`` read (:func:`xlasdk.formats.computation_from_hlo_proto`)."""
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise FormatError(f"{what}: expected bytes of an HloModuleProto, got {type(data).__name__}")
    if not data:
        raise FormatError(f"{what}: the data is empty")
    found = sniff_format(data)
    if found is not None and found is not Format.HLO_PROTO:
        raise FormatError(f"{what}: not an HLO module proto: it holds {found.description}")
    if found is None and (hint := jax_exported_hint(data)) is not None:
        raise FormatError(f"{what}: {hint}")
    try:
        inner = _find_module_proto(data)
    except ValueError as e:
        raise FormatError(f"{what}: not a valid protobuf message (truncated or corrupt): {e}") from None
    if inner is None:
        raise FormatError(f"{what}: the protobuf message is not an HloModuleProto (no name and computations)")
    return _from_hlo("proto", inner, what, Format.HLO_PROTO)


def stablehlo_program(data: str | bytes, what: str) -> LoadedProgram:
    """StableHLO text, MLIR bytecode or a portable artifact read
    (:func:`xlasdk.formats.computation_from_stablehlo`)."""
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if isinstance(data, bytes):
        if not data:
            raise FormatError(f"{what}: the data is empty")
        if data.startswith(_BYTECODE_MAGIC):
            return bytecode_program(data, what)
        text = _as_text(data)
        if text is None and (hint := jax_exported_hint(data)) is not None:
            raise FormatError(f"{what}: {hint}")
        if text is None:
            raise FormatError(f"{what}: neither StableHLO text nor MLIR bytecode (binary data without the "
                              "'ML\\xefR' bytecode header)")
        data = text
    if not isinstance(data, str):
        raise FormatError(f"{what}: expected StableHLO text (str) or bytecode (bytes), got {type(data).__name__}")
    if not data.strip():
        raise FormatError(f"{what}: the StableHLO text is empty")
    if _strip_leading_comments(data).startswith("HloModule"):
        raise FormatError(f"{what}: not StableHLO: it holds HLO text (use from_hlo_text or a .hlo suffix)")
    text = _stablehlo_in_worker(data, "text", what, "invalid StableHLO")
    return _loaded(_mlir.parse_module(text), what, fmt=Format.STABLEHLO_TEXT)


def _stablehlo_in_worker(data: str | bytes, kind: str, what: str, problem: str) -> str:
    """The generic text of a StableHLO module that the worker parsed and verified."""
    try:
        return untrusted.parse_stablehlo(data, kind, what)
    except isolated.Failed as e:
        if e.stage == "format":
            raise FormatError(e.message) from None
        raise FormatError(f"{what}: {problem}: {e.message}{newer_op_hint(e.message)}") from None


def bytecode_program(data: bytes, what: str) -> LoadedProgram:
    """MLIR bytecode or a StableHLO portable artifact read (``b"ML\\xefR"`` first)."""
    version = portable_artifact_version(data)
    kind = f"StableHLO portable artifact (v{version})" if version else "MLIR bytecode"
    if hashlib.sha256(data).digest() in _TRUSTED_BYTECODE:
        try:
            module = _mlir.deserialize_portable_artifact(data) if version else _mlir.parse_module(data)
        except Exception as e:  # pragma: no cover - bytes this process wrote
            raise FormatError(f"{what}: corrupt or truncated {kind}: {_one_line(e)}") from None
        return _loaded(module, what, fmt=Format.PORTABLE_ARTIFACT)
    if version is not None:
        problem = f"corrupt or truncated {kind}"
        current = _mlir.stablehlo_current_version()
        if _vtuple(version) > _vtuple(current):  # written by a newer jaxlib: may still read
            problem = (
                f"{kind} was written for a newer StableHLO than this jaxlib's ({current}, jaxlib "
                f"{_mlir.JAXLIB_VERSION}) and does not read here; write it with target_version={current!r} "
                f"or older, or load it with a newer jaxlib"
            )
        text = _stablehlo_in_worker(data, "artifact", what, problem)
    else:
        text = _stablehlo_in_worker(data, "bytecode", what, f"corrupt or truncated {kind}")
    return _loaded(_mlir.parse_module(text), what, fmt=Format.PORTABLE_ARTIFACT)


def _read(path: PathLike, what: str) -> bytes:
    """The file's bytes: regular files only, at most ``XLASDK_MAX_FILE_BYTES`` (:mod:`xlasdk._atomic`)."""
    try:
        return read_regular_file(path)
    except FileNotFoundError:
        raise FormatError(f"{what}: no such file") from None
    except IsADirectoryError:
        raise FormatError(f"{what}: is a directory, not a file") from None
    except OSError as e:
        raise FormatError(f"{what}: cannot read the file: {e.strerror or e}") from None


def _path_name(path: object, caller: str) -> str:
    """``path`` as the ``str`` errors name it; a path of another type, or with a NUL, is a FormatError."""
    try:
        return file_path(path)
    except (TypeError, ValueError) as e:
        raise FormatError(f"{caller}: {e}") from None
