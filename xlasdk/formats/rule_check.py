"""A loaded module's shape claims checked by the builder's own shape rules, where XLA does not check them.

XLA's verifier (and StableHLO's) accepts some modules that the op's wrapper refuses when the same
op is built, and XLA's runtime then trusts what the module claims: an FFT whose ``fft_length``
disagrees with its operand's trailing dimensions (``fft_type=FFT, fft_length={8}`` on a
``c64[16]`` operand) compiles, then computes from memory outside its operand (wrong values) or
has the FFT library abort the user's process (``fft_length={32}``: ``array sizes are not
conformable``). The loader's worker runs :func:`check_rules` on every verified module, so such a
module is refused when it is loaded, naming the instruction, never run.

The checks are the op table's rules (:attr:`xlasdk._optable.OpDef.rule`, the very functions the
wrappers call): :data:`CHECKED` says, for each op whose claims XLA leaves unchecked, how its
attributes and types become the rule's arguments; the rule itself is the row's.
``tests/test_loaded_rules.py`` loads a program of each kind the builder refuses and expects a
refusal at load or a clean compile error, never a crash or a value. The builder refuses a few
programs more that XLA verifies and runs to the answer its semantics give (``maximum`` of complex
numbers, ``topk`` of pred...): those load as they did (the test lists them and runs them).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from .._jaxlib.mlir import TypeInfo
from .._optable import OPS
from ..errors import DTypeError, ShapeError
from ..program.program_shape import _shape_from_type
from ..shape import Shape
from ..types import PrimitiveType, etype_from_mlir

if TYPE_CHECKING:
    from .._jaxlib import mlir_graph as _mg
    from ..ops.custom_call import ShardySharding

# The op families (xlasdk.ops: their rows' rules, the LAPACK contracts), the attribute enums and
# the MLIR walk are imported when a module's text names a checked op (check_rules), not with the
# loaders (issue 35): most modules have none. (Building the computation, and reading its
# instructions, still imports the op families: their rows say what each loaded op is.)

__all__ = ["CHECKED", "WHY", "RuleViolation", "check_rules"]


class RuleViolation(Exception):
    """An op of a loaded module that its row's shape rule refuses: ``name`` the instruction
    (its location's name, or ``line N`` of StableHLO text), ``message`` the rule's words."""

    def __init__(self, name: str, message: str, why: str = "") -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message
        self.why = why  # what XLA would do with it


def _array(t: TypeInfo) -> tuple[PrimitiveType, tuple[int, ...]] | None:
    """Element type and dimensions of a static tensor type (None for anything else: the rule is
    not asked about what it cannot be given exactly)."""
    if t[0] != "tensor" or any(d is None for d in t[2]):
        return None
    try:
        return etype_from_mlir(t[1]), tuple(int(d) for d in t[2])
    except KeyError:
        return None


def _fft(rule: Callable[..., Any], c: _mg.OpClaim, module: Any) -> None:
    from ..attrs import FftType

    x = _array(c.operands[0]) if c.operands else None
    kind, lengths = c.attrs.get("fft_type"), c.attrs.get("fft_length")
    if x is None or not isinstance(kind, str) or kind not in FftType.__members__ or not isinstance(lengths, tuple):
        return
    rule("Fft", x[0], x[1], FftType[kind], tuple(int(v) for v in lengths))


def _shape(t: TypeInfo) -> Shape | None:
    if t[0] != "tensor" or any(d is None for d in t[2]):
        return None
    try:
        return _shape_from_type(t)
    except ValueError:
        return None


def _remainder(rule: Callable[..., Any], c: _mg.OpClaim, module: Any) -> None:
    shapes = [_shape(t) for t in c.operands]
    if len(shapes) == 2 and shapes[0] is not None and shapes[1] is not None:
        rule("Rem", shapes[0], shapes[1])


def _rng(rule: Callable[..., Any], c: _mg.OpClaim, module: Any) -> None:
    from ..attrs import RandomDistribution

    dist = c.attrs.get("rng_distribution")
    if len(c.operands) < 2 or len(c.results) != 1 or not isinstance(dist, str):
        return
    a, b, r = _shape(c.operands[0]), _shape(c.operands[1]), _shape(c.results[0])
    if a is None or b is None or r is None or dist not in RandomDistribution.__members__:
        return
    rule("RngNormal" if dist == "NORMAL" else "RngUniform", RandomDistribution[dist], ("a", a), ("b", b), r)


def _any_shape(t: TypeInfo) -> Shape | None:
    try:
        return _shape_from_type(t)
    except ValueError:
        return None


def _type_text(t: TypeInfo) -> str:
    """``f32[?,4]`` of a tensor type (``?`` a dynamic dimension); the kind of any other type."""
    if t[0] != "tensor":
        return str(t[0])
    return f"{t[1]}[{','.join('?' if d is None else str(d) for d in t[2])}]"


def _custom_call(rule: Callable[..., Any], c: _mg.OpClaim, module: Any) -> None:
    from ..ops.custom_call import custom_call_operand_check
    from ..ops.lapack_contracts import is_lapack_target

    target = c.attrs.get("call_target_name")
    if not isinstance(target, str) or "python_cpu_callback" in target or "python_gpu_callback" in target:
        return  # host callbacks of a loaded JAX module: compiling it says why they cannot run here
    sharding = _shardy_sharding(c, module) if target == "xla.sdy.FuncResultSharding" and c.returned else None
    shapes = [_any_shape(t) for t in (*c.operands, *c.results)]
    known = [s for s in shapes if s is not None]
    if len(known) != len(shapes):
        if is_lapack_target(target):  # its kernel trusts the shapes: what cannot be read is refused
            raise ShapeError(f"CustomCall: target {target!r} takes static array shapes, got "
                             f"({', '.join(_type_text(t) for t in (*c.operands, *c.results))})")
        # what needs no shapes is checked all the same (operand counts, Shardy's frontend attribute)
        custom_call_operand_check("CustomCall", target, [_type_text(t) for t in c.operands], sharding, c.returned)
        return
    operands, results = known[: len(c.operands)], known[len(c.operands) :]
    result = results[0] if len(results) == 1 else Shape.tuple_shape(results)
    rule("CustomCall", target, operands, result, _ffi_config(c), _layouts(c), _aliases(target, c),
         sharding=sharding, entry_result=c.returned)


def _shardy_sharding(c: _mg.OpClaim, module: Any) -> ShardySharding | None:
    """What XLA's HLO exporter reads of an ``xla.sdy.FuncResultSharding`` call that gives a result
    of the entry function: its frontend attribute ``xla.sdy.sharding``, parsed as a
    ``#sdy.sharding_per_value``, and the mesh its sharding names, looked up as XLA does
    (:mod:`xlasdk._jaxlib.shardy`); None when the call has no such attribute."""
    from .._jaxlib import shardy
    from ..ops.custom_call import ShardySharding

    attrs = c.frontend_attributes or {}
    if "xla.sdy.sharding" not in attrs:
        return None
    spelled = attrs["xla.sdy.sharding"]
    if spelled is None:  # XLA casts it to a string: an attribute of another kind (or not UTF-8) is refused
        given = c.attrs.get("mhlo.frontend_attributes")
        return ShardySharding(str(given.get("xla.sdy.sharding") if isinstance(given, dict) else given))
    read = shardy.sharding_per_value(spelled)
    if read is None or len(read) != 1:
        return ShardySharding(spelled, None if read is None else len(read))
    name, inline_axes, axes = read[0]
    if name is None:
        return ShardySharding(spelled, 1, "", inline_axes, axes)
    meshes = shardy.module_meshes(module)
    return ShardySharding(spelled, 1, f"@{name}", None if meshes is None else meshes.get(name), axes)


_ALIAS = re.compile(r"#stablehlo\.output_operand_alias<output_tuple_indices = \[([\d, ]*)\], "
                    r"operand_index = (\d+), operand_tuple_indices = \[([\d, ]*)\]>")


def _aliases(target: str, c: _mg.OpClaim) -> list[tuple[tuple[int, ...], int, tuple[int, ...]]]:
    """The call's ``output_operand_aliases``, read from their spelling (ShapeError for a LAPACK
    call whose aliases cannot be read: what the kernel would overwrite is unknown)."""
    from ..ops.lapack_contracts import is_lapack_target

    got = c.attrs.get("output_operand_aliases")
    if got is None:
        return []
    out = []
    for a in got if isinstance(got, list) else [got]:
        m = _ALIAS.fullmatch(a) if isinstance(a, str) else None
        if m is None:
            if is_lapack_target(target):
                raise ShapeError(f"CustomCall: target {target!r} with output_operand_aliases xlasdk cannot read: {a!r}")
            return []
        ints = [tuple(int(v) for v in g.split(",") if v.strip()) for g in (m.group(1), m.group(3))]
        out.append((ints[0], int(m.group(2)), ints[1]))
    return out


def _ffi_config(c: _mg.OpClaim) -> dict[str, Any] | None:
    """A typed-FFI call's attributes: ``backend_config`` when it is a dictionary, or
    ``mhlo.backend_config`` (JAX's spelling, next to an empty ``backend_config = ""``); None
    when there is no dictionary, or two that disagree, or a dictionary next to a non-empty string
    (which of them XLA hands the kernel is not for this check to guess: the contracts that need an
    attribute then refuse the call)."""
    given = [v for v in (c.attrs.get("backend_config"), c.attrs.get("mhlo.backend_config")) if v not in (None, "")]
    if not given or not all(isinstance(v, dict) for v in given) or any(v != given[0] for v in given):
        return None
    config: dict[str, Any] = given[0]
    return config


def _layouts(c: _mg.OpClaim) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]] | None:
    """``(operand_layouts, result_layouts)``, minor to major; None when the call has none, or
    when they cannot be read (the rules that need them then refuse the call)."""
    ops_, res = c.attrs.get("operand_layouts"), c.attrs.get("result_layouts")
    if not isinstance(ops_, list) or not isinstance(res, list):
        return None
    try:
        return [tuple(int(v) for v in x) for x in ops_], [tuple(int(v) for v in x) for x in res]
    except (TypeError, ValueError):
        return None


#: For each op name: how a loaded op's types and attributes become the arguments of its row's
#: rule (``adapter(rule, claim, module)`` calls ``rule`` and lets ShapeError / DTypeError through;
#: ``module``, the parsed module, for what the op names outside itself: a Shardy mesh). The
#: ops whose claims XLA's verifier accepts and its compiler or runtime does not survive (found by
#: ``tests/test_loaded_rules.py``'s list): an FFT whose lengths are not its operand's (the FFT
#: library reads outside the operand or aborts), ``remainder`` of complex numbers (XLA:CPU's
#: compiler dies of SIGSEGV), ``rng`` of pred (its compiler aborts: ``rng_expander.cc``), a custom
#: call to a target xlasdk knows with shapes that target does not take (``TopK`` claiming more
#: values than its operand holds reads outside it; Shardy's marks (``xla.sdy.*``) with other than
#: one operand, or an ``xla.sdy.FuncResultSharding`` that gives a result of the entry function
#: without the frontend attribute ``xla.sdy.sharding`` XLA's exporter reads, abort it; ``Eigh``,
#: ``Qr`` and ``ProductOfElementaryHouseholderReflectors`` without their operands crash it
#: (SIGSEGV); ``SliceToDynamic`` and ``__onednn$*``, internal
#: to XLA's CPU compiler, abort it or exhaust its memory; jaxlib's LAPACK kernels, which read and
#: write the sizes their first operand implies whatever the other buffers claim, and refuse a
#: ``lapack_*`` name they have no contract for: :mod:`xlasdk.ops.lapack_contracts`, which also reads
#: the typed-FFI attributes and the layouts). Custom calls to jaxlib's Python host
#: callbacks are left to the compile, which says why a loaded program cannot call them.
CHECKED: Final[dict[str, Callable[[Callable[..., Any], _mg.OpClaim, Any], None]]] = {
    "stablehlo.fft": _fft,
    "stablehlo.remainder": _remainder,
    "stablehlo.rng": _rng,
    "stablehlo.custom_call": _custom_call,
}

#: What XLA does with each checked op when its rule refuses it (for the message).
WHY: Final[dict[str, str]] = {
    "stablehlo.fft": "XLA does not check this: the compiled FFT reads memory outside its operand or aborts the process",
    "stablehlo.remainder": "XLA's verifier accepts it, and XLA:CPU's compiler crashes on it",
    "stablehlo.rng": "XLA's verifier accepts it, and XLA's compiler aborts on it",
    "stablehlo.custom_call": "XLA's verifier accepts it; compiled, the call reads outside its operands, or XLA's "
    "compiler aborts or refuses it",
}

#: How each checked op is spelled in HLO text (``fft(``) and in MLIR's generic form
#: (``"stablehlo.fft"``, as the worker prints a StableHLO module): a text without any of them is
#: not walked (walking costs about 5 us an op; most modules have none of these ops).
_SPELLINGS: Final = ("fft(", "remainder(", "rng(", "custom-call(", *(f'"{name}"' for name in CHECKED))


def _instruction(loc: str) -> str:
    """``'fft.2'`` of ``loc("fft.2")``; ``line 3`` of ``loc("file":3:8)``; else the location."""
    if loc.startswith('loc("'):
        end = loc.find('"', 5)
        rest = loc[end + 1 :] if end > 0 else ""
        if end > 0 and rest.startswith(":") and rest.split(":")[1].isdigit():
            return f"line {rest.split(':')[1]}"
        if end > 0:
            return repr(loc[5:end])
    return loc


def _words(e: Exception) -> str:
    """The rule's message without the `` — at file.py:N`` of the (worker's) call site."""
    return str(e).split(" — at ", 1)[0]


def check_rules(module: Any, text: str | None = None) -> None:
    """Run the rule of each op of :data:`CHECKED` over ``module`` (parsed and verified).

    ``text``: the module's HLO text or its StableHLO text in MLIR's generic form, when at hand: a
    text naming none of the checked ops is not walked (most modules).

    Raises
    ------
    RuleViolation
        For the first op its rule refuses (the instruction's name and the rule's message).
    """
    if text is not None and not any(s in text for s in _SPELLINGS):
        return
    from .. import ops as _ops  # noqa: F401  (the op families define the rows whose rules run here)
    from .._jaxlib import mlir_graph as _mg

    for c in _mg.ops_named(module, frozenset(CHECKED)):
        row = OPS.get(c.name)
        if row is None or row.rule is None:  # pragma: no cover - CHECKED names rows with rules
            continue
        try:
            CHECKED[c.name](row.rule, c, module)
        except (ShapeError, DTypeError) as e:
            raise RuleViolation(_instruction(c.loc), _words(e), WHY.get(c.name, "")) from None
