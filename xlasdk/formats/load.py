"""``load_computation``: a computation from any file XLA, JAX or xlasdk writes, its format chosen
by the suffix and recognised from the content; ``computation_from_*``: from a format's text or
bytes (:mod:`.loaders` reads each format; :mod:`.snapshot` and :mod:`.jax_export` the files that
wrap a module). This module sits above the program model: it makes :class:`~xlasdk.XlaComputation`
objects of what :mod:`.loaders` reads."""

from __future__ import annotations

from .._jaxlib import isolated
from ..errors import FormatError
from ..program.computation import XlaComputation
from .loaders import _path_name, _read, bytecode_program, hlo_proto_program, hlo_text_program, stablehlo_program
from .sniff import (
    _BYTECODE_MAGIC,
    _SUFFIX_LIST,
    Format,
    PathLike,
    _as_text,
    _parse_format,
    format_from_suffix,
    jax_exported_hint,
    sniff_format,
    text_snapshot_kind,
)

__all__ = ["load_computation", "computation_from_hlo_text", "computation_from_hlo_proto", "computation_from_stablehlo"]


def computation_from_hlo_text(text: str, what: str = "from_hlo_text") -> XlaComputation:
    """An :class:`~xlasdk.XlaComputation` from HLO text (``HloModule ...``).

    XLA parses the text, imports it as StableHLO and verifies it, first in xlasdk's worker
    process (XLA aborts on some inconsistent modules), then here. Optimized HLO (fusions,
    bitcasts, layouts, the stack-frame tables of JAX dumps) is rewritten for the import.

    Raises
    ------
    FormatError
        For syntax errors and inconsistent modules, naming ``what``, the line and the problem;
        for modules XLA aborts on, XLA's ``Check failed:`` line.
    """
    return XlaComputation(*hlo_text_program(text, what))


def computation_from_hlo_proto(data: bytes, what: str = "from_hlo_proto") -> XlaComputation:
    """An :class:`~xlasdk.XlaComputation` from a serialized ``HloModuleProto``.

    Also accepts the ``HloProto`` and ``HloSnapshot`` wrappers of XLA's ``*.hlo.pb`` dumps.

    Raises
    ------
    FormatError
        For empty, truncated or corrupt data and inconsistent modules.
    """
    return XlaComputation(*hlo_proto_program(data, what))


def computation_from_stablehlo(data: str | bytes, what: str = "from_stablehlo") -> XlaComputation:
    """An :class:`~xlasdk.XlaComputation` from StableHLO text, MLIR bytecode or a portable artifact.

    Raises
    ------
    FormatError
        For syntax errors, modules that fail MLIR verification, corrupt bytecode or a module
        without a ``main`` function.
    """
    return XlaComputation(*stablehlo_program(data, what))


def _from_jax_export(data: bytes, what: str) -> XlaComputation:
    """The module of a ``jax.export`` file (:mod:`xlasdk.formats.jax_export`)."""
    from .jax_export import read_jax_export  # imported for such a file only (a plain module's load needs neither)

    info = read_jax_export(data, what)
    return XlaComputation(*bytecode_program(info.mlir_module, f"{what} (its jax.export module)"))


def load_computation(path: PathLike, format: Format | str | None = None) -> XlaComputation:
    """Load a computation from a file, choosing the format by the suffix.

    Parameters
    ----------
    path:
        ``.hlo`` / ``.hlo.txt`` (HLO text), ``.mlir`` (StableHLO text), ``.mlirbc`` (StableHLO
        portable artifact or MLIR bytecode), ``.pb`` (``HloModuleProto``, or the ``HloProto``
        XLA's dumps write). For ``.txt`` and any other suffix the format is recognised from the
        content, so XLA dump files such as ``module_0000.main.before_optimizations.txt`` load as
        they are, and so does a ``jax.export`` file (``Exported.serialize()``, any suffix): its
        StableHLO module, with the shardings and ``num_partitions`` it holds (the file's other
        fields: :func:`xlasdk.formats.read_jax_export`), and a text-format ``HloSnapshot``
        (``*.hlo_unoptimized_snapshot.txt``; its module, like the binary one's:
        :func:`xlasdk.load_snapshot` gives its arguments too).
    format:
        Force a format (``"hlo"``, ``"mlir"``, ``"mlirbc"``, ``"pb"`` or a :class:`Format`).

    Returns
    -------
    XlaComputation
        Compiles, runs, prints and saves like a built one; its program shape comes from the
        module's ``main`` function (HLO tuple parameters and results are flattened).

    Raises
    ------
    FormatError
        If the file is missing, empty, truncated, corrupt, of another format than its suffix
        says, or holds an inconsistent module; the message names the file and the problem.
    """
    what = _path_name(path, "load_computation")
    data = _read(path, what)
    if not data:
        raise FormatError(f"{what}: the file is empty")
    isolated.prestart()  # its start overlaps the checks below
    fmt = _parse_format(format) if format is not None else format_from_suffix(what)
    shown = format.value if isinstance(format, Format) else format
    said = f"format={shown!r} says" if format is not None else "the suffix says"  # who named the format
    sniffed = sniff_format(data)
    if sniffed is None and fmt is None and jax_exported_hint(data) is not None:
        return _from_jax_export(data, what)
    if sniffed is None and (hint := jax_exported_hint(data)) is not None:
        raise FormatError(f"{what}: {hint}")
    if sniffed is None and text_snapshot_kind(data) is not None:
        if fmt is not None:
            raise FormatError(f"{what}: {said} {fmt.description}, but the file holds a text-format "
                              "HloSnapshot (xs.load_snapshot reads it with its arguments)")
        from .snapshot import read_snapshot

        return read_snapshot(data, what).computation
    if fmt is None:
        if sniffed is None:
            raise FormatError(
                f"{what}: not a recognised computation format (expected HLO text, StableHLO text, a "
                f"portable artifact, an HloModuleProto or a jax.export file; suffixes {_SUFFIX_LIST})"
            )
        fmt = sniffed
    elif sniffed is not None and sniffed is not fmt:
        raise FormatError(
            f"{what}: {said} {fmt.description}, but the file holds {sniffed.description}"
        )
    if fmt is Format.HLO_TEXT:
        text = _as_text(data)
        if text is None:
            raise FormatError(f"{what}: not HLO text (binary data, or not UTF-8)")
        return computation_from_hlo_text(text, what)
    if fmt is Format.STABLEHLO_TEXT:
        text = _as_text(data)
        if text is None:
            raise FormatError(f"{what}: not StableHLO text (binary data, or not UTF-8)")
        return computation_from_stablehlo(text, what)
    if fmt is Format.PORTABLE_ARTIFACT:
        if not data.startswith(_BYTECODE_MAGIC):
            raise FormatError(f"{what}: not a StableHLO portable artifact (no 'ML\\xefR' bytecode header)")
        return XlaComputation(*bytecode_program(data, what))
    return computation_from_hlo_proto(data, what)
