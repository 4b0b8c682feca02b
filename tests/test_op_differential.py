"""Every public op's evaluation rule against XLA:CPU (issue 44 step 6).

The op-call campaign (``tests/campaigns/op_calls.py``) holds one valid call per public op of
``xlasdk.ops`` (``TEMPLATES``; ``tests/campaigns/test_op_calls.py`` fails for an op without one).
Here each op's template builds a small program (each random variant a template draws, from a few
fixed draws), given random inputs of a fixed seed (:func:`xlasdk.random_inputs`: valid indices,
positive operands where an op needs them), and :func:`xlasdk.compare` runs it on XLA:CPU and
through the reference evaluator and judges the values under the CPU's error model: the library's
own judgment, the one ``xlasdk compare`` gives, not a second tolerance written here. A wrong
evaluation rule shows as a DIVERGENCE named by the op (``test_a_planted_wrong_rule_is_named``
plants two).

The ops are the public ops the campaign enumerates, and the rows they reach are checked against
the op table: every row with an evaluation rule is reached by some compared program
(``test_every_evaluated_row_is_compared``). An op whose evaluation cannot be compared (random
numbers from XLA's own generator, side effects, tokens, a Python callback) is in :data:`SKIP` with
its reason; a skipped op that compares cleanly fails as a stale entry.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
import xlasdk.reference  # noqa: F401  - binds the evaluation rules to the rows
from tests.campaigns import op_calls
from xlasdk import _optable, ops
from xlasdk._jaxlib.opset import FIRST_WITH_EXP2_LOG2_FMA, HAS_EXP2_LOG2_FMA
from xlasdk._optable import OPS, OpDef
from xlasdk.ops.elementwise import UNARY
from xlasdk.ops.fma import FMA
from xlasdk.ops.shaping import REVERSE, SET_DIMENSION_SIZE
from xlasdk.ops.side_effects import AFTER_ALL, CREATE_TOKEN
from xlasdk.reference._orders import outputs_verdict

#: the random inputs' seed, and the draws of each template (a template picks a variant with the
#: campaign's rng: a binary op with and without broadcasting, a Conditional as if or case...)
SEED = 2026
TEMPLATE_DRAWS = range(4)

_TOKEN = "its result is a token: there is no value to compare"
_HOST = "device-to-host transfers: xlasdk refuses them on XLA:CPU (op_calls.ALWAYS_RAISE), there is no program"
#: public ops whose evaluation is not compared with XLA's, one line each on why
SKIP: dict[str, str] = {
    "RngUniform": "stablehlo.rng draws from XLA's own unspecified generator: the reference refuses it on purpose",
    "RngNormal": "stablehlo.rng draws from XLA's own unspecified generator: the reference refuses it on purpose",
    "HostCallback": "calls a Python function on the host (a custom call to XLA's Python callback): not evaluated",
    "DebugPrint": "prints on the host (a side effect) and returns a token",
    "CreateToken": _TOKEN,
    "AfterAll": _TOKEN,
    "InfeedWithToken": "reads the device's infeed queue (the reference refuses it): its values are the host's",
    "OutfeedWithToken": "writes the device's outfeed queue (a side effect, refused by the reference); " + _TOKEN,
    "SendToHost": _HOST,
    "RecvFromHost": _HOST,
    "ApproxTopKReductionOutputSize": "a plain function of ints: it builds no op",
    "RemoveDynamicDimension": ("its template cuts a dimension below its bound with a constant size: the reference "
                               "follows static sizes only (by design; SetDimensionSize is compared at the bound)"),
}

#: rows with an evaluation rule that no compared program reaches, one line each on why
ROWS_NOT_COMPARED: dict[OpDef, str] = {
    CREATE_TOKEN: "makes a token (CreateToken): " + _TOKEN,
    AFTER_ALL: "joins tokens (AfterAll): " + _TOKEN,
    # the emitters' own rows (the graph's tuple and get_tuple_element are the nodes of Tuple, While...)
    _optable.STABLEHLO_TUPLE: "written by the emitters only: never a node of a built graph",
    _optable.STABLEHLO_GET_TUPLE_ELEMENT: "written by the emitters only: never a node of a built graph",
}
if not HAS_EXP2_LOG2_FMA:
    for _row in (UNARY["Exp2"].opdef, UNARY["Log2"].opdef, FMA):
        ROWS_NOT_COMPARED[_row] = (f"jaxlib before {FIRST_WITH_EXP2_LOG2_FMA} has no {_row.name}: its wrapper builds "
                                   "it from other ops")

#: ops whose program ``compare`` misjudges although its values agree: each is judged by its outputs
#: against their carried bounds alone (``report.outputs``), without compare's op-by-op step
OUTPUTS_ONLY: dict[str, str] = {}

Program = tuple[xs.XlaComputation, list[Any]]


def _nodes(comp: xs.XlaComputation) -> Iterator[Any]:
    """Every node of a built program's graph, those of its regions too."""
    g = comp.graph()
    stack, seen = [g.root, *g.side_effects, *g.parameters], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        stack.extend(n.operands)
        for r in n.regions:
            stack.extend([*r.params, *r.results, *(r.bindings or ()), *r.captures, *r.effects])


def _inputs(comp: xs.XlaComputation) -> list[Any]:
    """Random inputs of :data:`SEED`; a parameter that sets a dimension's run-time size takes the
    dimension's bound, the one size the reference follows (it refuses a smaller one by design)."""
    params = list(comp.graph().parameters)
    given: list[Any] = [None] * len(params)
    for n in _nodes(comp):
        if n.opdef.same_op(SET_DIMENSION_SIZE) and any(n.operands[1] is p for p in params):
            bound = n.operands[0].shape.dimensions()[n.attrs["dimension"]]
            given[next(i for i, p in enumerate(params) if p is n.operands[1])] = np.int32(bound)
    return xs.random_inputs(comp, seed=SEED, given=given)


@cache
def programs(name: str) -> tuple[Program, ...]:
    """The programs op ``name``'s template builds (one per distinct variant of its draws), each with
    its inputs; none for an op that builds no op.

    Raises
    ------
    AssertionError: the op has no template (naming what to add).
    """
    if name not in op_calls.TEMPLATES:
        raise AssertionError(
            f"{name}: no valid call in tests/campaigns/op_calls.py TEMPLATES: add one (one line; the op-call campaign "
            f"and this differential build from it), or, if its evaluation cannot be compared with XLA's, also a line "
            f"in SKIP of tests/test_op_differential.py saying why")
    out: dict[str, Program] = {}
    for draw in TEMPLATE_DRAWS:
        c = op_calls.Ctx(name, random.Random(draw))
        args, kwargs = op_calls.TEMPLATES[name](c)
        result = getattr(ops, name)(*args, **kwargs)
        if not op_calls._holds_ops(result):  # a plain function (ApproxTopKReductionOutputSize)
            return ()
        builder, root = op_calls._root(result)
        comp = builder.build(root)
        text = comp.as_stablehlo_text()
        if text not in out:
            out[text] = (comp, _inputs(comp))
    return tuple(out.values())


def differential(name: str) -> list[str]:
    """What is wrong with op ``name``'s evaluation against XLA:CPU: one line per program variant
    that does not MATCH under ``compare``'s CPU error model (empty: none)."""
    problems = []
    for k, (comp, args) in enumerate(programs(name)):
        try:
            report = xs.compare(comp, args, device="cpu:0")
        except xs.XlaSdkError as e:
            problems.append(f"{name} (variant {k}): compare raised {type(e).__name__}: {e}")
            continue
        verdict = outputs_verdict(report) if name in OUTPUTS_ONLY else "MATCH" if report.ok else "DIVERGENCE"
        if verdict == "DIVERGENCE":
            problems.append(f"{name} (variant {k}): the reference evaluator and XLA:CPU differ\n{report}")
    return problems


def _reached(name: str) -> set[OpDef]:
    return {n.opdef for comp, _ in programs(name) for n in _nodes(comp)}


def _compared() -> list[str]:
    return [n for n in op_calls.public_ops() if n not in SKIP]


@pytest.mark.parametrize("name", _compared())
def test_the_reference_evaluates_the_op_as_xla_cpu_does(name: str) -> None:
    assert programs(name), f"{name}: its template builds no program to compare"
    problems = differential(name)
    assert not problems, "\n".join(problems)


def test_every_evaluated_row_is_compared() -> None:
    """The op table's side: each row the reference has a rule for is reached by a compared program
    (a new row needs a public op with a template) or is in ROWS_NOT_COMPARED with its reason."""
    reached = {row for name in _compared() for row in _reached(name)}
    evaluated = {row for row in OPS.values() if row.evaluate is not None}
    missing = sorted(row.name for row in evaluated - reached - set(ROWS_NOT_COMPARED))
    assert not missing, (f"rows with an evaluation rule that no compared program reaches: {missing}: give the op that "
                         "builds each a template in tests/campaigns/op_calls.py TEMPLATES (or, if it cannot be "
                         "compared, a line in ROWS_NOT_COMPARED of tests/test_op_differential.py saying why)")
    stale = sorted(row.name for row in set(ROWS_NOT_COMPARED) & reached)
    assert not stale, f"in ROWS_NOT_COMPARED but compared: remove them: {stale}"
    assert all(row.evaluate is not None for row in ROWS_NOT_COMPARED)


def test_skip_names_public_ops_that_cannot_be_compared() -> None:
    """Each entry of SKIP is a public op, says why, and does not compare cleanly (a stale entry fails)."""
    public = set(op_calls.public_ops())
    assert set(SKIP) <= public, f"not public ops: {sorted(set(SKIP) - public)}"
    assert set(OUTPUTS_ONLY) <= set(_compared()), "OUTPUTS_ONLY names compared public ops"
    assert all(len(why) > 20 for why in SKIP.values())
    stale = []
    for name in SKIP:
        try:
            compared = bool(programs(name)) and not differential(name)
        except xs.XlaSdkError:  # no program can be built (device-to-host transfers)
            compared = False
        if compared:
            stale.append(name)
    assert not stale, f"in SKIP but their evaluation compares cleanly with XLA:CPU: remove them: {stale}"


def test_a_new_op_without_a_template_fails_naming_what_to_add(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(op_calls.TEMPLATES, "Rev")
    programs.cache_clear()
    try:
        with pytest.raises(AssertionError, match=r"Rev: no valid call in tests/campaigns/op_calls.py TEMPLATES"):
            differential("Rev")
    finally:
        programs.cache_clear()


def _plant(monkeypatch: pytest.MonkeyPatch, row: OpDef, wrong: Callable[[Any], Any]) -> None:
    right = _optable._EVALUATE[row]
    monkeypatch.setitem(_optable._EVALUATE, row, lambda o, a, ev: wrong(right(o, a, ev)))


def test_a_planted_wrong_rule_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two wrong rules, one that moves data (Rev reversing nothing) and one a little off (Tanh 1e-4
    too large, a few hundred ulps): the differential names exactly the ops whose programs reach them."""
    tanh = UNARY["Tanh"].opdef
    _plant(monkeypatch, REVERSE, lambda v: np.flip(v, 0))
    _plant(monkeypatch, tanh, lambda v: (np.asarray(v, np.float64) * (1 + 1e-4)).astype(v.dtype))
    planted = {REVERSE, tanh}
    reaching = sorted(n for n in _compared() if _reached(n) & planted)
    assert {"Rev", "Tanh"} <= set(reaching)
    others = ["Add", "Transpose", "Exp", "Logistic"]
    named = {n for n in [*reaching, *others] if differential(n)}
    assert named == set(reaching)
    (line, *_) = differential("Tanh")
    assert line.startswith("Tanh (variant 0): the reference evaluator and XLA:CPU differ") and "DIVERGENCE" in line
