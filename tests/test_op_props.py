"""The tools' op properties live on the rows (issue 34 step 3): each :class:`OpProps` flag's set of
ops equals the opcode-string set the tools held before (written here once, as the oracle of a
behaviour-neutral move), and the tools' modules no longer spell opcode strings."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import xlasdk.ops  # noqa: F401  - defines the rows and declares their props
from xlasdk._optable import OPAQUE_PROPS, OPS, ROW_ALIASES, OpDef, OpProps, declare, opaque_row

# The sets as xlasdk/reference/_bounds.py and _walk.py spelled them (commit 1006757).
_MOVES = {"stablehlo.reshape", "stablehlo.transpose", "stablehlo.broadcast_in_dim", "stablehlo.slice",
          "stablehlo.convert", "stablehlo.copy", "mhlo.copy", "stablehlo.reverse", "stablehlo.negate",
          "stablehlo.dynamic_slice", "stablehlo.concatenate", "stablehlo.optimization_barrier"}
_OLD: dict[str, set[str]] = {
    "moves_data": _MOVES,
    "linear": {"stablehlo.pad", "stablehlo.gather", "stablehlo.dynamic_update_slice", "stablehlo.select",
               "stablehlo.real", "stablehlo.imag", "stablehlo.complex"},  # _LINEAR = _MOVES | these
    "additive": {"stablehlo.add", "stablehlo.subtract", "stablehlo.reduce", "stablehlo.dot_general", "stablehlo.dot",
                 "stablehlo.convolution", "stablehlo.reduce_window", "stablehlo.fft"},
    "sums": {"stablehlo.reduce", "stablehlo.reduce_window"},
    "bilinear": {"stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"},
    "matches_reference": {  # _EXACT = _MOVES | these
        "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide", "stablehlo.sqrt",
        "stablehlo.remainder", "stablehlo.reduce_precision", "stablehlo.abs", "stablehlo.maximum",
        "stablehlo.minimum", "stablehlo.clamp", "stablehlo.select", "stablehlo.floor", "stablehlo.ceil",
        "stablehlo.round_nearest_even", "stablehlo.round_nearest_afz", "stablehlo.sign", "stablehlo.pad",
        "stablehlo.gather", "stablehlo.dynamic_update_slice", "stablehlo.scatter", "stablehlo.real", "stablehlo.imag",
        "stablehlo.complex", "stablehlo.constant", "stablehlo.iota", "stablehlo.bitcast_convert", "chlo.square",
        "chlo.next_after"},
    "inexact_complex": {"stablehlo.multiply", "stablehlo.divide", "stablehlo.sqrt", "stablehlo.abs",
                        "stablehlo.remainder", "chlo.square"},
    "control_flow": {"stablehlo.while", "stablehlo.if", "stablehlo.case"},
    "calls_function": {"func.call", "stablehlo.composite"},
    "logical": {"stablehlo.and", "stablehlo.or", "stablehlo.xor", "stablehlo.not"},
    # reference/_precision.py's EXACT_OPS (its rows: a name without one was skipped) and CORRECTLY_ROUNDED,
    # with the aliases its row_of read as rows (stablehlo.dot as dot_general, [mhlo|stablehlo].copy as reshape)
    "bit_exact": {
        "stablehlo.reshape", "stablehlo.transpose", "stablehlo.broadcast_in_dim", "stablehlo.slice",
        "stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice", "stablehlo.concatenate", "stablehlo.pad",
        "stablehlo.gather", "stablehlo.reverse", "stablehlo.iota", "stablehlo.constant",
        "stablehlo.optimization_barrier", "stablehlo.select", "stablehlo.clamp", "stablehlo.compare",
        "stablehlo.and", "stablehlo.or", "stablehlo.xor", "stablehlo.not", "stablehlo.shift_left",
        "stablehlo.shift_right_arithmetic", "stablehlo.shift_right_logical", "stablehlo.popcnt",
        "stablehlo.count_leading_zeros", "stablehlo.bitcast_convert", "stablehlo.convert",
        "stablehlo.reduce_precision", "stablehlo.negate", "stablehlo.abs", "stablehlo.sign", "stablehlo.maximum",
        "stablehlo.minimum", "stablehlo.floor", "stablehlo.ceil", "stablehlo.round_nearest_even",
        "stablehlo.round_nearest_afz", "stablehlo.is_finite", "stablehlo.real", "stablehlo.imag",
        "stablehlo.complex", "stablehlo.get_tuple_element", "stablehlo.tuple", "chlo.next_after",
        "mhlo.copy", "stablehlo.copy"},
    "correctly_rounded": {"stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "chlo.square",
                          "stablehlo.remainder"},
}
# reference/_precision.py's F32_ULPS and F32_ULPS_HIGHEST keys (now rows)
_F32_ULPS = {"stablehlo.tanh", "stablehlo.exponential", "stablehlo.exponential_minus_one", "stablehlo.log",
             "stablehlo.log_plus_one", "stablehlo.logistic", "stablehlo.rsqrt", "stablehlo.sqrt", "stablehlo.cbrt",
             "stablehlo.sine", "stablehlo.cosine", "stablehlo.tan", "stablehlo.atan2", "stablehlo.divide", "chlo.erf",
             "chlo.erfc", "chlo.erf_inv", "chlo.acos", "chlo.asin", "chlo.atan", "chlo.acosh", "chlo.asinh",
             "chlo.atanh", "chlo.cosh", "chlo.sinh", "chlo.bessel_i1e"}
_F32_ULPS_HIGHEST = {"stablehlo.exponential", "stablehlo.exponential_minus_one", "chlo.erfc"}


# inputs.py's _PASS_THROUGH and _POSITIVE
_PASS_THROUGH: dict[str, tuple[int, ...] | None] = {
    "stablehlo.convert": (0,), "stablehlo.reshape": (0,), "stablehlo.broadcast_in_dim": (0,),
    "stablehlo.transpose": (0,), "stablehlo.copy": (0,), "stablehlo.slice": (0,), "stablehlo.reverse": (0,),
    "stablehlo.concatenate": None, "stablehlo.select": (1, 2), "stablehlo.dynamic_slice": (0,),
    "stablehlo.gather": (0,), "stablehlo.pad": (0,), "stablehlo.optimization_barrier": None,
}
_POSITIVE = {
    "stablehlo.log": (0,), "stablehlo.log_plus_one": (0,), "stablehlo.sqrt": (0,), "stablehlo.rsqrt": (0,),
    "stablehlo.divide": (1,), "stablehlo.remainder": (1,), "stablehlo.power": (0,),
}
_NAMES = sorted({*OPS, *ROW_ALIASES, *OPAQUE_PROPS})


def _props_of(name: str) -> OpProps:
    """The props a node of op ``name`` has: its row's, or an opaque row's as the importer makes it."""
    return OPS[name].props if name in OPS else opaque_row(name, False).props


def _flagged(flag: str) -> set[str]:
    return {name for name in _NAMES if getattr(_props_of(name), flag)}


def test_every_field_has_its_oracle() -> None:
    assert {*_OLD, "passes_operands", "positive_operands"} == set(OpProps.__dataclass_fields__)


@pytest.mark.parametrize("flag", sorted(set(_OLD) - {"bit_exact", "correctly_rounded"}))
def test_flag_holds_the_ops_the_tools_named(flag: str) -> None:
    """Each flag holds exactly the ops of the tools' old string set (behaviour-neutral)."""
    assert _flagged(flag) == _OLD[flag]


@pytest.mark.parametrize(("flag", "kind"), [("bit_exact", "exact"), ("correctly_rounded", "rounded")])
def test_the_error_model_rows_are_the_old_sets(flag: str, kind: str) -> None:
    """The error model's exact / correctly rounded ops (on a TPU: no IEEE divide) are the old sets',
    the ops without a row read as their aliases."""
    from xlasdk.reference import _precision as pm

    tpu = pm.device_kind("tpu-v5e")
    got = set()
    for name in _NAMES:
        row = OPS[name] if name in OPS else opaque_row(name, False)
        bound = pm.op_bound(SimpleNamespace(opdef=row, opcode=name), tpu)
        if bound is not None and bound.kind == kind:
            got.add(name)
    assert got == _OLD[flag]
    assert {n for n in OPS if getattr(OPS[n].props, flag)} == _OLD[flag] - set(ROW_ALIASES)


def test_input_ranges_follow_the_old_tables() -> None:
    assert {n: _props_of(n).passes_operands for n in _NAMES if _props_of(n).passes_operands != ()} == _PASS_THROUGH
    assert {n: _props_of(n).positive_operands for n in _NAMES if _props_of(n).positive_operands} == _POSITIVE


def test_the_ulps_tables_keep_their_ops() -> None:
    from xlasdk.reference import _precision as pm

    assert {r.name for r in pm.F32_ULPS} == _F32_ULPS and {r.name for r in pm.F32_ULPS_HIGHEST} == _F32_ULPS_HIGHEST
    assert all(OPS[r.name] is r for r in [*pm.F32_ULPS, *pm.F32_ULPS_HIGHEST])


@pytest.mark.parametrize("name", ["stablehlo.while", "stablehlo.reshape", "mhlo.copy", "stablehlo.dot", "func.call",
                                  "stablehlo.foo"])
def test_an_opaque_row_has_the_props_of_its_name(name: str) -> None:
    """A loaded module's opaque row (a while of tuple operands, an op without a row) reads as the
    old opcode-string tests read it: by name, or by the name of the row it is an alias of."""
    row = opaque_row(name, False)
    table = OPS.get(ROW_ALIASES.get(name, name))
    want = OPAQUE_PROPS[name] if name in OPAQUE_PROPS else table.props if table is not None else OpProps()
    assert row.props == want
    if table is not None:
        assert row.same_op(table) and row is not table
    assert not row.same_op(OPS["stablehlo.add"])


def test_declare_refuses_what_is_not_a_row_or_a_flag() -> None:
    with pytest.raises(ValueError, match="rows of the table"):
        declare(OpDef("stablehlo.add"), logical=True)
    with pytest.raises(ValueError, match="OpProps fields"):
        declare(OPS["stablehlo.add"], fast=True)
    with pytest.raises(ValueError, match="OpProps fields"):
        declare(OPS["stablehlo.add"], logical=False)
    with pytest.raises(ValueError, match="OpProps fields"):
        declare(OPS["stablehlo.add"], positive_operands=None)


_ROOT = Path(__file__).resolve().parents[1] / "xlasdk"
#: the issue's target: the tools' files, and the opcode strings each may still spell (ops that have
#: no row, evaluated or recognised by name, and text that is not an op test)
_TOOLS = ["reference/*.py", "inputs.py", "reducer.py", "_reduce*.py"]
_ALLOWED = {
    "reference/_walk.py": 1,  # evaluates_opaque("stablehlo.composite"): no row
    "reference/linalg.py": 1,  # evaluates_opaque("stablehlo.dot"): no row (a loaded HLO dot)
    "reference/shaping.py": 1,  # evaluates_opaque("mhlo.copy", "stablehlo.copy"): no row
    "reference/window.py": 1,  # evaluates_opaque("stablehlo.select_and_scatter"): no row (built from other ops)
    "reference/_orders.py": 1,  # _TOPK: mhlo.topk / chlo.top_k / stablehlo.top_k, no rows
    "reference/_bisect_html.py": 1,  # removeprefix("stablehlo.") of a name shown to the user
}
#: files outside this count for now: compare's op-by-op module (its own set of moves), being
#: rewritten while the props moved (issue 34 step 3 leaves it to that work)
_NOT_COUNTED = {"reference/_per_op.py"}


def test_the_tools_spell_no_opcode_strings() -> None:
    """``grep -c '"stablehlo\\.'`` over the tools' files (133 before the props moved onto the rows)."""
    counts = {}
    for pattern in _TOOLS:
        for f in sorted(_ROOT.glob(pattern)):
            n = f.read_text().count('"stablehlo.')
            name = str(f.relative_to(_ROOT))
            if n and name not in _NOT_COUNTED:
                counts[name] = n
    assert counts == _ALLOWED
    assert sum(counts.values()) == 6


# -- every row's props are declared, or it says why none applies (issue 44 step 6) ---------------------------
_GRAPH = "the graph's own row: its value is its argument's, its operands' or its callee's, which the tools follow"
_ULPS = ("an element-wise function with no measured f32 ulps row (reference/_precision.F32_ULPS): judged by the "
         "generic bound of an element-wise function (4 ulps of the exact value)")
_SPECIAL = "a special function with no measured f32 ulps row: " + _ULPS.split(": ", 1)[1]
_GENERIC = "whose work the bounds do not follow: one ulp of its value (the generic bound)"
_TOKEN = "a token or a host queue: no value for the bounds, the precision model or the input ranges"
_MOVES_DEVICES = ("moves data between devices (one device: the value itself); not declared moves_data or bit_exact "
                  "yet: the generic bound applies (a candidate for both)")
_SUMS_DEVICES = "sums over devices (one device: the value itself); not declared additive yet: the generic bound applies"
_INTEGER = "an integer result (an id, a size, random bits): compared exactly by its type, no flag changes that"
#: rows of the op table with no declared props (``xlasdk/ops/_props.py``) and no precision-model row
#: (``F32_ULPS``), each with why none applies; a new row must be in one of the three
NO_PROPS: dict[str, str] = {
    "parameter": _GRAPH,
    "tuple": _GRAPH,
    "get_tuple_element": _GRAPH,
    "call": _GRAPH,
    "stablehlo.return": "ends a region: its operands are the region's results",
    "stablehlo.cholesky": "a factorization " + _GENERIC + "; it needs a positive definite operand, which no "
                          "flag of the input ranges expresses",
    "stablehlo.triangular_solve": "a solve " + _GENERIC,
    "stablehlo.get_dimension_size": _INTEGER,
    "stablehlo.set_dimension_size": ("the operand at its bound (the reference follows static sizes only, a smaller "
                                     "size is refused): not declared moves_data yet (a candidate)"),
    "chlo.conj": ("negates the imaginary part, exactly: not declared moves_data or bit_exact yet (negate is): the "
                  "generic element-wise bound applies (a candidate for both)"),
    "chlo.zeta": _SPECIAL,
    "stablehlo.map": "applies its region element by element; an op " + _GENERIC,
    "stablehlo.batch_norm_training": "means and variances XLA expands into sums; an op " + _GENERIC,
    "stablehlo.batch_norm_inference": "a normalization XLA expands; an op " + _GENERIC,
    "stablehlo.batch_norm_grad": "gradients XLA expands into sums; an op " + _GENERIC,
    "stablehlo.custom_call": "means what its target does (the evaluator's rules by target name); an op " + _GENERIC,
    "stablehlo.create_token": _TOKEN,
    "stablehlo.after_all": _TOKEN,
    "stablehlo.infeed": _TOKEN + " (refused by the evaluator)",
    "stablehlo.outfeed": _TOKEN + " (refused by the evaluator)",
    "stablehlo.all_gather": _MOVES_DEVICES,
    "stablehlo.all_to_all": _MOVES_DEVICES,
    "stablehlo.collective_permute": _MOVES_DEVICES,
    "stablehlo.all_reduce": _SUMS_DEVICES,
    "stablehlo.reduce_scatter": _SUMS_DEVICES,
    "stablehlo.replica_id": _INTEGER,
    "stablehlo.partition_id": _INTEGER,
    "stablehlo.rng_bit_generator": _INTEGER,
    "stablehlo.rng": "draws from XLA's own generator: refused by the evaluator, nothing to bound",
    "stablehlo.sort": ("reorders its operands' elements; its order is judged by the keys (reference/_orders.py), not "
                       "a flag: not declared moves_data yet (a candidate)"),
    "chlo.top_k": "the largest elements and their indices, judged by their order (reference/_orders.py) as a sort's",
    "stablehlo.fma": ("a*b + c rounded once: no precision row yet, the generic element-wise bound applies (a "
                      "candidate for correctly_rounded where XLA:CPU emits a fused multiply-add)"),
}


def _unconsidered() -> tuple[list[str], list[str]]:
    """The rows with no declared props, no precision-model row and no NO_PROPS line, and the NO_PROPS
    lines that are stale (their row declares props or has a precision row, or is no row)."""
    from xlasdk.reference import _precision as pm

    considered = {n for n, row in OPS.items() if row.props != OpProps()}
    considered |= {row.name for row in [*pm.F32_ULPS, *pm.F32_ULPS_HIGHEST, *pm.F32_MEASURED]}
    missing = sorted(set(OPS) - considered - set(NO_PROPS))
    stale = sorted((set(NO_PROPS) & considered) | (set(NO_PROPS) - set(OPS)))
    return missing, stale


def test_every_row_declares_its_props_or_says_why_not() -> None:
    """Adding an op: its row gets its props (``declare(...)`` in ``xlasdk/ops/_props.py``), its
    precision-model row, or a line here saying why none applies; nothing is left to a default unseen."""
    missing, stale = _unconsidered()
    assert not missing, (f"rows without props: {missing}: declare them in xlasdk/ops/_props.py (and add them to the "
                         "oracle sets above), give them a precision-model row, or a line in NO_PROPS saying why none "
                         "applies (CONTRIBUTING.md, 'Adding an op')")
    assert not stale, f"NO_PROPS lines for rows that declare props, have a precision row or are no rows: {stale}"
    assert all(len(why) > 30 for why in NO_PROPS.values())


def test_a_new_row_without_props_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(OPS, "stablehlo.new_op", OpDef("stablehlo.new_op"))
    monkeypatch.setitem(NO_PROPS, "stablehlo.gone", "a row that no longer exists, left behind by a rename")
    assert _unconsidered() == (["stablehlo.new_op"], ["stablehlo.gone"])
