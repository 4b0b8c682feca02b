"""MLIR / StableHLO / HLO conversions on top of jaxlib's bundled bindings.

Every function takes and returns plain Python values (``str``, ``bytes``) or opaque jaxlib
objects typed ``Any``; callers never import jaxlib themselves.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from typing import Any, Final

import jaxlib
import jaxlib._hlo as _hlo
from jaxlib import xla_client as _xc
from jaxlib.mlir import ir as _ir
from jaxlib.mlir._mlir_libs import _jax_mlir_ext
from jaxlib.mlir.dialects import chlo as _chlo
from jaxlib.mlir.dialects import mhlo as _mhlo
from jaxlib.mlir.dialects import sdy as _sdy
from jaxlib.mlir.dialects import stablehlo as _stablehlo

from .. import _metadata
from .._mlir_attrs import mlir_unescape as _mlir_unescape

HLO_TEXT_TUPLE_OPERAND_REFS: Final[bool] = int(getattr(_xc, "_version", 0)) >= 505
"""Whether XLA's HLO parser reads ``%t#k`` operands (element ``k`` of a tuple-shaped ``%t``) and
``topk(..., is_stable=)``: XLA of jaxlib 0.12.0.1 (xla_client 505) writes and reads them; older
releases refuse them, and :mod:`xlasdk.formats.hlo_rewrite` spells them the old way first."""

__all__ = [
    "JAXLIB_VERSION",
    "MlirError",
    "context",
    "parse_module",
    "module_to_pretty_text",
    "module_to_hlo",
    "parsed_module_to_hlo",
    "hlo_text",
    "hlo_proto",
    "hlo_dot_graph",
    "stablehlo_current_version",
    "stablehlo_minimum_version",
    # formats (xlasdk/formats/)
    "hlo_module_from_text",
    "hlo_module_from_proto",
    "hlo_module_to_text",
    "hlo_module_to_proto",
    "hlo_proto_to_stablehlo",
    "set_missing_int_attributes",
    "xla_computation_from_proto",
    "module_to_text",
    "without_copies",
    "main_signature",
    "module_name",
    "serialize_portable_artifact",
    "deserialize_portable_artifact",
    "stablehlo_version_for",
    # StableHLO's reference interpreter (run it in a child process: it aborts on what it lacks)
    "interpret_module",
]

_J: Any = importlib.import_module("jaxlib._jax")  # untyped extension module

JAXLIB_VERSION: str = jaxlib.__version__ if hasattr(jaxlib, "__version__") else "unknown"
MlirError = _ir.MLIRError

_local = threading.local()


def context() -> Any:
    """A per-thread MLIR context with the StableHLO, CHLO and upstream dialects loaded."""
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        registry = _ir.DialectRegistry()
        _jax_mlir_ext.register_dialects(registry)
        ctx = _ir.Context()
        ctx.append_dialect_registry(registry)
        ctx.load_all_available_dialects()
        _stablehlo.register_dialect(ctx)
        _chlo.register_dialect(ctx)
        _mhlo.register_mhlo_dialect(ctx)  # HLO imported from XLA dumps keeps mhlo.fusion & co.
        _sdy.register_dialect(ctx)  # Shardy: JAX's lowerings of sharded programs carry sdy.mesh & co.
        _local.ctx = ctx
    return ctx


def parse_module(text: str | bytes, *, verify: bool = True) -> Any:
    """Parse MLIR text or bytecode into an ``ir.Module`` (raises ``MlirError``)."""
    ctx = context()
    with ctx, _ir.Location.unknown():
        m = _ir.Module.parse(text)
        if verify and not m.operation.verify():  # pragma: no cover - verify raises instead
            raise ValueError("module failed verification")
    return m


def module_to_pretty_text(module: Any, *, debug_info: bool = False) -> str:
    """StableHLO text in the pretty (custom) form."""
    with context():
        return str(module.operation.get_asm(enable_debug_info=debug_info, large_elements_limit=None))


def module_to_parsable_text(module: Any, *, debug_info: bool, always_check: bool = False) -> str:
    """Pretty text of ``module`` that parses back: the generic form where the pretty one would
    not (StableHLO prints a rank-0 ``dynamic_slice`` that its own parser rejects). The pretty
    text is test-parsed when ``always_check``, else only when it holds a ``dynamic_slice``."""
    text = module_to_pretty_text(module, debug_info=debug_info)
    if always_check or "stablehlo.dynamic_slice" in text:
        try:
            parse_module(text, verify=False)
        except MlirError:
            return module_to_text(module, debug_info=debug_info, generic=True)
    return text


def module_to_bytecode(module: Any) -> bytes:
    """MLIR bytecode of a module, keeping locations."""
    import io

    buf = io.BytesIO()
    with context():
        module.operation.write_bytecode(buf)
    return buf.getvalue()


def module_to_hlo(text: str | bytes) -> Any:
    """Convert a StableHLO module (text or bytecode) to a jaxlib ``XlaComputation``.

    Raises jaxlib's runtime error on failure; callers wrap it.
    """
    return _J.mlir.mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=False)


def parsed_module_to_hlo(module: Any) -> Any:
    """Convert an already parsed (and verified) ``ir.Module`` to a jaxlib ``XlaComputation``.

    Hands XLA's converter the module's MLIR bytecode (locations included), so the module is not
    printed and parsed again: for a 10,000-op module this costs about 10 ms of serialization
    plus a bytecode read, where passing the text makes the converter re-parse ~1.4 MB of text
    (about 200 ms more). The HLO is the same as :func:`module_to_hlo` gives for the text.

    Raises jaxlib's runtime error on failure; callers wrap it.
    """
    return module_to_hlo(module_to_bytecode(module))


def hlo_text(xla_computation: Any, *, metadata: bool = True, large_constants: bool = True) -> str:
    """HLO text of a jaxlib ``XlaComputation``, with ``metadata={...}`` when asked."""
    opts = _hlo.HloPrintOptions()
    opts.print_metadata = metadata
    opts.print_large_constants = large_constants
    return str(xla_computation.get_hlo_module().to_string(opts))


def hlo_modules_text(modules: Sequence[Any], *, large_constants: bool) -> str:
    """HLO text of jaxlib ``HloModule`` objects (an executable's), with metadata; with
    ``large_constants`` every constant written out (text XLA's parser reads back), else constants
    of more than 10 elements as ``{...}`` (XLA's default printer)."""
    opts = _hlo.HloPrintOptions()
    opts.print_metadata = True
    opts.print_large_constants = large_constants
    return "\n\n".join(str(m.to_string(opts)) for m in modules)


def hlo_proto(xla_computation: Any) -> bytes:
    return bytes(xla_computation.as_serialized_hlo_module_proto())



def hlo_proto_with_metadata(marked_text: str, table: Any) -> bytes:
    """XLA's StableHLO -> HLO conversion of :func:`xlasdk._metadata.mark_locations`' text, with
    the metadata fields the converter drops written into the converted ``HloModuleProto``
    (:func:`xlasdk._metadata.patch_hlo_proto`)."""
    return _metadata.patch_hlo_proto(hlo_proto(module_to_hlo(marked_text)), table)

def hlo_dot_graph(xla_computation: Any) -> str:
    return str(_hlo.hlo_module_to_dot_graph(xla_computation.get_hlo_module()))


def stablehlo_current_version() -> str:
    return str(_stablehlo.get_current_version())


def stablehlo_minimum_version() -> str:
    return str(_stablehlo.get_minimum_version())


# -- file formats (used by xlasdk/formats/) ----------------------------------------------------
class _QuietNativeStderr:
    """Send file descriptor 2 to /dev/null for the duration of a call.

    XLA logs a RET_CHECK failure with a C++ stack trace on stderr before it returns the very
    same error as a status; the status becomes our exception, the log is noise.
    """

    _lock = threading.Lock()  # fd 2 is process-wide: one silencer at a time

    def __enter__(self) -> None:
        import os
        import sys

        self._lock.acquire()
        self._saved: int | None = None
        try:
            sys.stderr.flush()
            self._saved = os.dup(2)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.close(devnull)
        except OSError:  # pragma: no cover - no usable fd 2: nothing to silence
            self._saved = None

    def __exit__(self, *exc: object) -> None:
        import os

        try:
            if self._saved is not None:
                os.dup2(self._saved, 2)
                os.close(self._saved)
        finally:
            self._lock.release()


def hlo_module_from_text(text: str) -> Any:
    """XLA's HLO text parser: ``HloModule`` (raises on syntax errors).

    Some shape-inconsistent instructions make this parser abort the process instead of
    raising; callers must pre-check the text (``xlasdk.formats``).
    """
    return _hlo.hlo_module_from_text(text)


def hlo_module_from_proto(data: bytes) -> Any:
    """``HloModule`` from a serialized ``HloModuleProto``, validated by XLA (raises on bad protos)."""
    with _QuietNativeStderr():
        return _hlo.XlaComputation(data).get_hlo_module()


def hlo_module_to_text(module: Any, *, metadata: bool = True, backend_config: bool = True) -> str:
    """HLO text of an ``HloModule`` with large constants written out (re-parsable); without the
    instructions' ``backend_config`` when not ``backend_config``."""
    opts = _hlo.HloPrintOptions()
    opts.print_metadata = metadata
    opts.print_backend_config = backend_config
    opts.print_large_constants = True
    return str(module.to_string(opts))


def hlo_module_to_proto(module: Any) -> bytes:
    return bytes(module.as_serialized_hlo_module_proto())


def hlo_proto_to_stablehlo(proto: bytes) -> bytes:
    """XLA's HLO -> StableHLO importer: MLIR bytecode (may keep ``mhlo.*`` ops such as fusions).

    Tuple parameters and results of the entry computation are flattened. Some inconsistent
    modules abort the process here; callers must pre-check them (``xlasdk.formats``).
    """
    return bytes(_J.mlir.hlo_to_stablehlo(proto))


def xla_computation_from_proto(proto: bytes) -> Any:
    """jaxlib ``XlaComputation`` over a serialized ``HloModuleProto`` (for ``as_hlo_text``)."""
    with _QuietNativeStderr():
        return _hlo.XlaComputation(proto)


def module_to_text(module: Any, *, debug_info: bool = True, generic: bool = False) -> str:
    """Module text (pretty by default, MLIR generic syntax when ``generic``), with locations."""
    with context():
        return str(
            module.operation.get_asm(
                enable_debug_info=debug_info, print_generic_op_form=generic, large_elements_limit=None
            )
        )


def without_copies(text: str) -> str:
    """Generic text (with locations) of the verified module ``text`` with every ``mhlo.copy``
    replaced by its operand.

    XLA's HLO -> StableHLO import writes an HLO ``copy`` (a change of layout: its value is its
    operand's) as ``mhlo.copy``, which has no StableHLO op. XLA:CPU's pipeline converts it back to
    HLO; libtpu's refuses it (``failed to legalize operation 'mhlo.copy'``). A copy whose result
    type is not its operand's (none that XLA writes) is kept, for the compiler to name.
    """
    with context():
        module = parse_module(text, verify=False)
        copies: list[Any] = []

        def visit(op: Any) -> Any:
            if op.name == "mhlo.copy":
                copies.append(op)
            return _ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        for op in copies:
            if len(op.operands) == 1 and len(op.results) == 1 and op.operands[0].type == op.results[0].type:
                op.results[0].replace_all_uses_with(op.operands[0])
                op.erase()
        return module_to_text(module, debug_info=True, generic=True)


def string_value(attr: Any) -> str:
    """The value of a ``StringAttr``; bytes that are not UTF-8 (``module @"a\\FF"``, a custom call's
    ``backend_config``) shown escaped as ``\\xff``, never the bindings' raw ``RuntimeError``."""
    a = _ir.StringAttr(attr)
    try:
        return str(a.value)
    except (RuntimeError, UnicodeDecodeError):  # nanobind: "str_from_cstr_and_size(): conversion error!"
        return bytes(a.value_bytes).decode("utf-8", "backslashreplace")


def module_name(module: Any) -> str | None:
    """The module's ``sym_name`` (``module @name``), or None."""
    attrs = module.operation.attributes
    if "sym_name" not in attrs:
        return None
    return string_value(attrs["sym_name"])


def set_missing_int_attributes(module: Any, values: dict[str, int]) -> None:
    """Give ``module`` each ``name = value : i32`` module attribute of ``values`` it does not
    have (``mhlo.num_partitions``, as JAX's lowerings write it)."""
    attrs = module.operation.attributes
    with module.context, _ir.Location.unknown():
        i32 = _ir.IntegerType.get_signless(32)
        for name, value in values.items():
            if name not in attrs:
                attrs[name] = _ir.IntegerAttr.get(i32, value)


#: A type of ``main``'s signature, read through the bindings' typed API:
#: ``("token",)``; ``("tuple", [TypeInfo, ...])``; ``("tensor", ELEMENT, DIMS, BOUNDS)`` with the
#: element type's MLIR name (``"f32"``), each dimension's size or None when dynamic, and the
#: ``#stablehlo.bounds`` of the dimensions (None without an encoding; an entry None when
#: unbounded); ``("other", TEXT)`` for anything else (unranked tensors, other dialects' types).
TypeInfo = tuple[Any, ...]


def _type_info(t: Any) -> TypeInfo:
    t = t.maybe_downcast() if hasattr(t, "maybe_downcast") else t
    if _stablehlo.TokenType.isinstance(t):
        return ("token",)
    if isinstance(t, _ir.TupleType):
        return ("tuple", [_type_info(t.get_type(i)) for i in range(t.num_types)])
    if isinstance(t, _ir.RankedTensorType):
        dims = [None if _ir.ShapedType.is_dynamic_size(d) else int(d) for d in t.shape]
        bounds: list[int | None] | None = None
        enc = t.encoding
        if enc is not None and _stablehlo.TypeExtensions.isinstance(enc):
            ext = _stablehlo.TypeExtensions(enc)
            bounds = [None if _ir.ShapedType.is_dynamic_size(v) else int(v) for v in ext.bounds]
        elif enc is not None:
            return ("other", str(t))
        return ("tensor", str(t.element_type), dims, bounds)
    text = str(t)
    return ("token",) if text == "!mhlo.token" else ("other", text)


def main_signature(module: Any) -> tuple[list[TypeInfo], list[str | None], list[TypeInfo]] | None:
    """``(argument types, argument location names, result types)`` of ``func.func @main``.

    Types are :data:`TypeInfo` tuples read through MLIR's typed API (``RankedTensorType``,
    ``TupleType``, StableHLO's ``TokenType`` and bounds extension); a location name is the
    string of a ``loc("name")`` argument location (None otherwise). None when the module has no
    ``main``.
    """
    with context():
        for op in module.body.operations:
            if op.operation.name != "func.func":
                continue
            attrs = op.operation.attributes
            if string_value(attrs["sym_name"]) != "main":
                continue
            ftype = _ir.FunctionType(_ir.TypeAttr(attrs["function_type"]).value)
            names: list[str | None] = []
            for arg in op.regions[0].blocks[0].arguments if len(op.regions[0].blocks) else []:
                loc = str(arg.location)
                names.append(_mlir_unescape(loc[5:-2]) if loc.startswith('loc("') and loc.endswith('")') else None)
            if len(names) != len(ftype.inputs):
                names = [None] * len(ftype.inputs)
            return [_type_info(t) for t in ftype.inputs], names, [_type_info(t) for t in ftype.results]
    return None


def serialize_portable_artifact(module: Any, target_version: str) -> bytes:
    """StableHLO portable artifact of ``module`` for ``target_version`` (raises on failure).

    CHLO ops are legalized to StableHLO on the way; versions above the current one are clamped.
    """
    buf = _module_bytecode(module)
    return bytes(_J.mlir.serialize_portable_artifact(buf, target_version))


def _module_bytecode(module: Any) -> bytes:
    import io

    out = io.BytesIO()
    with context():
        module.operation.write_bytecode(out)
    return out.getvalue()


def deserialize_portable_artifact(data: bytes) -> Any:
    """``ir.Module`` (current StableHLO) from a portable artifact; raises on corrupt data."""
    ctx = context()
    with ctx, _ir.Location.unknown():
        return _J.mlir.deserialize_portable_artifact(data, context=ctx)


def stablehlo_version_for(requirement: str) -> str:
    """The StableHLO version of a compatibility requirement: ``NONE``, ``WEEK_4``, ``WEEK_12``, ``MAX``."""
    req = getattr(_stablehlo.StablehloCompatibilityRequirement, requirement)
    return str(_stablehlo.get_version_from_compatibility_requirement(req))


def interpret_module(text: str, args: Sequence[Any]) -> list[Any]:
    """Run ``func.func @main`` of a StableHLO module (text) in StableHLO's reference interpreter
    (``stablehlo.eval_module``) on ``args`` and return its results as numpy arrays.

    Parameters
    ----------
    text
        A StableHLO module whose ``main`` takes and returns ranked tensors only (no tokens or
        tuples).
    args
        One numpy array per argument of ``main``, of its shape and element type (bool for ``i1``,
        ``ml_dtypes`` arrays for bf16 and fp8; 2/4-bit integer arguments are refused).

    Returns
    -------
    list of numpy arrays, one per result of ``main``, of the result's shape and element type. The
    interpreter computes each op in its own type (a bf16 ``add`` rounds to bf16 once). Results the
    bindings cannot read (bf16, fp8, 2/4-bit integers, complex) are read through ops appended
    before the return that change no bit: a ``bitcast_convert`` to an integer of the same width,
    a ``convert`` to 8 bits, ``real`` and ``imag``.

    Raises
    ------
    MlirError
        The text does not parse or verify, or the interpreter reports an error.
    ValueError
        ``main`` is missing, has a token, tuple or 2/4-bit integer in its signature, or ``args`` do
        not fit it.

    The interpreter *aborts the process* on ops it does not implement (custom calls, some CHLO
    ops) and on malformed programs: call this only in a
    child process (``xlasdk._jaxlib.isolated.request("xlasdk._jaxlib.mlir:interpret_module", ...)``).
    It is slow (about 0.7 M multiply-adds per second).
    """
    import ml_dtypes
    import numpy as np
    from jaxlib.mlir.dialects import func as _func

    narrow = {np.dtype(t): t in (ml_dtypes.int2, ml_dtypes.int4) for t in
                    (ml_dtypes.int2, ml_dtypes.int4, ml_dtypes.uint2, ml_dtypes.uint4)}

    from ..types import etype_from_mlir, etype_to_dtype

    ctx = context()
    with ctx, _ir.Location.unknown():
        module = _ir.Module.parse(text)
        main = next((op for op in module.body.operations if op.operation.name == "func.func"
                     and string_value(op.operation.attributes["sym_name"]) == "main"), None)
        if main is None:
            raise ValueError("interpret_module: the module has no func.func @main")
        ftype = _ir.FunctionType(_ir.TypeAttr(main.operation.attributes["function_type"]).value)
        ins = list(ftype.inputs)
        if len(ins) != len(args):
            raise ValueError(f"interpret_module: main takes {len(ins)} arguments, {len(args)} given")
        attrs = []
        for k, (t, a) in enumerate(zip(ins, args, strict=True)):
            if not isinstance(t, _ir.RankedTensorType):
                raise ValueError(f"interpret_module: argument {k} of main has type {t}: not a ranked tensor")
            dt = etype_to_dtype(etype_from_mlir(str(t.element_type)))
            if dt in narrow:  # the bindings abort on them
                raise ValueError(f"interpret_module: argument {k} has type {t}: 2/4-bit integer arguments are not "
                                 "supported (convert them inside the program)")
            arr: Any = np.array(a, dtype=dt, order="C")  # a Buffer to the bindings
            if tuple(arr.shape) != tuple(t.shape):
                raise ValueError(f"interpret_module: argument {k} has shape {arr.shape}, main wants {t}")
            attrs.append(_ir.DenseElementsAttr.get(arr, type=t))
        block = main.regions[0].blocks[0]
        ret = list(block.operations)[-1]
        readable: list[Any] = []
        plan: list[tuple[str, np.dtype[Any], int]] = []  # (how, result dtype, how many values)
        with _ir.InsertionPoint(ret):
            for k, v in enumerate(ret.operands):
                t = v.type
                if not isinstance(t, _ir.RankedTensorType):
                    raise ValueError(f"interpret_module: result {k} of main has type {t}: not a ranked tensor")
                et = str(t.element_type)
                dt = etype_to_dtype(etype_from_mlir(et))
                if isinstance(t.element_type, _ir.ComplexType):
                    readable += [_stablehlo.RealOp(v).result, _stablehlo.ImagOp(v).result]
                    plan.append(("complex", dt, 2))
                elif dt in narrow:  # int4 / int2: widened exactly
                    signed = narrow[dt]
                    wide = _ir.IntegerType.get_signless(8) if signed else _ir.IntegerType.get_unsigned(8)
                    readable.append(_stablehlo.ConvertOp(_ir.RankedTensorType.get(t.shape, wide), v).result)
                    plan.append(("widened", dt, 1))
                elif dt.kind in "iub" or dt in (np.float16, np.float32, np.float64):
                    readable.append(v)
                    plan.append(("direct", dt, 1))
                else:  # bf16, fp8: their bits, as an unsigned integer of the same width
                    bits_t = _ir.IntegerType.get_unsigned(8 * dt.itemsize)
                    readable.append(_stablehlo.BitcastConvertOp(_ir.RankedTensorType.get(t.shape, bits_t), v).result)
                    plan.append(("bits", dt, 1))
            _func.ReturnOp(readable)
        ret.operation.erase()
        main.operation.attributes["function_type"] = _ir.TypeAttr.get(
            _ir.FunctionType.get(ins, [v.type for v in readable]))
        outs = [np.asarray(o) for o in _stablehlo.eval_module(module, attrs)]
    result: list[Any] = []
    i = 0
    for how, dt, n in plan:
        vals = outs[i:i + n]
        i += n
        if how == "complex":
            result.append((vals[0].astype(np.float64) + 1j * vals[1].astype(np.float64)).astype(dt))
        elif how == "bits":
            result.append(np.ascontiguousarray(vals[0]).view(dt))
        else:
            result.append(vals[0].astype(dt))
    return result


# HloOpcode enum names whose HLO text spelling is not their words joined by '-'.
_HLO_OPCODE_SPELLING: Final = {
    "kOptimizationBarrier": "opt-barrier", "kClz": "count-leading-zeros", "kLog1p": "log-plus-one",
    "kExpm1": "exponential-minus-one", "kTopK": "topk", "kAtan2": "atan2", "kCbrt": "cbrt",
    "kExp": "exponential", "kCos": "cosine", "kSin": "sine", "kPopulationCount": "popcnt",
}


def hlo_instruction_opcodes(module: Any) -> dict[str, str]:
    """``instruction name -> HLO opcode`` as HLO text spells it (``get-tuple-element``) for every
    instruction of every computation of an ``HloModule``."""
    import re

    out: dict[str, str] = {}
    for comp in module.computations():
        for ins in comp.instructions():
            raw = str(getattr(ins.opcode, "name", ins.opcode)).rsplit(".", 1)[-1]
            spelled = _HLO_OPCODE_SPELLING.get(raw)
            if spelled is None:
                spelled = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", raw.removeprefix("k")).lower()
            out[str(ins.name)] = spelled
    return out


def text_without_locations(module: Any) -> str:
    """Generic text of a copy of a verified module whose every location is ``loc(unknown)``
    (MLIR's ``strip-debuginfo`` pass): no op keeps metadata, so XLA's converter writes neither
    ``metadata=`` nor stack-frame tables. ``module`` itself is left as it is."""
    from jaxlib.mlir import passmanager

    with context():
        copy = parse_module(module_to_text(module, debug_info=True, generic=True), verify=False)
        passmanager.PassManager.parse("builtin.module(strip-debuginfo)").run(copy.operation)
        return module_to_text(copy, debug_info=True, generic=True)
