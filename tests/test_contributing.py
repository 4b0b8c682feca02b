"""CONTRIBUTING.md's "Adding an op" list is the truth (issue 44 step 6).

The list names every place an op needs and the test that fails until it is filled. This file
keeps it so: :data:`PLACES` is each item with its test file and the test functions that ask for
the place; the list must name exactly these items, in order, each with what it names and its
test; every test file that enumerates the op table or the public ops (found by reading the
sources, :func:`completeness_files`) must be a place's test or say in :data:`NOT_PLACES` why it
asks nothing of a new op. The docs place is checked here too: every public op's docstring.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import xlasdk.ops as ops

ROOT = Path(__file__).resolve().parents[1]
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
SECTION = "## Adding an op: every place, and the test that asks for it"


@dataclass(frozen=True)
class Place:
    """One item of the list: the test file that fails until the place is filled (None: reviewed,
    no test asks for it), the test functions there that do, and what the item must name."""

    test: str | None
    checks: tuple[str, ...]
    names: tuple[str, ...]


#: the list's items, in its order
PLACES: dict[str, Place] = {
    "Op table row": Place("tests/test_optable.py", (
        "test_every_row_names_a_registered_stablehlo_or_chlo_op",
        "test_ledger_names_every_registered_op_the_table_lacks",
    ), ("define(", "xlasdk/ops/<family>.py", "NOT_DEFINED")),
    "Shape rule": Place("tests/test_optable.py", (
        "test_every_row_binds_its_shape_rule_or_gives_a_documented_reason",
        "test_a_rule_is_a_documented_function_of_the_family_that_defines_the_row",
    ), ("rule=",)),
    "Shape rule fuzzing": Place("tests/test_fuzz_shape_rules.py", (
        "test_every_rule_of_the_table_is_fuzzed_or_says_why_not",), ("FUZZED", "NOT_FUZZED")),
    "Attribute kinds": Place("tests/test_attr_kinds.py", ("test_every_declared_kind_has_a_reader",), (
        "AttrKind", "xlasdk/_mlir_attrs.py", "xlasdk/program/attr_kinds.py")),
    "Wrapper": Place("tests/test_op_signatures.py", ("test_no_public_op_parameter_is_typed_bare_any",), (
        "__all__", "xlasdk/ops/elementwise.py")),
    "Docs": Place("tests/test_contributing.py", ("test_every_public_op_has_its_docstring",), (
        "Parameters", "Returns", "Raises")),
    "Evaluation rule": Place("tests/test_reference_rules.py", (
        "test_every_row_of_the_table_has_an_evaluation_rule_or_a_refusal",
        "test_a_rule_lives_in_the_reference_module_of_its_op_family",
    ), ("@evaluates(", "xlasdk/reference/<family>.py", "refuse_evaluation(")),
    "Template": Place("tests/campaigns/test_op_calls.py", ("test_every_public_op_has_a_valid_call",), (
        "TEMPLATES", "tests/campaigns/op_calls.py")),
    "Differential": Place("tests/test_op_differential.py", (
        "test_the_reference_evaluates_the_op_as_xla_cpu_does", "test_every_evaluated_row_is_compared",
    ), ("SKIP", "ROWS_NOT_COMPARED")),
    "Props": Place("tests/test_op_props.py", (
        "test_every_row_declares_its_props_or_says_why_not", "test_flag_holds_the_ops_the_tools_named",
    ), ("declare(", "xlasdk/ops/_props.py", "NO_PROPS")),
    "Precision row": Place("tests/test_op_props.py", ("test_every_row_declares_its_props_or_says_why_not",), (
        "F32_ULPS", "xlasdk/reference/_precision.py")),
    "Element-wise oracle": Place("tests/ops/test_elementwise.py", (
        "test_unary_reference_table_covers_every_op", "test_binary_reference_table_covers_every_op",
        "test_generated_functions_carry_their_names",
    ), ("UNARY_REF", "BINARY_REF")),
    "Values test": Place(None, (), ("tests/ops/test_<family>.py", "check_direct_hlo")),
    "New family": Place(None, (), ("xlasdk/ops/__init__.py", "xlasdk/reference/<family>.py",
                                   "tests/test_reference_rules.py")),
    "CHANGELOG": Place(None, (), ("CHANGELOG.md",)),
}

#: test files that enumerate the op table or the public ops but ask nothing of a new op
NOT_PLACES: dict[str, str] = {
    "tests/campaigns/op_calls.py": "holds the templates: the Template place itself, asked for by test_op_calls.py",
    "tests/ops/test_arguments.py": "parametrized over the element-wise tables: a new op is checked without an edit",
    "tests/test_built_index.py": "indexes every template of the op-call campaign by the emitter's record: a new op's "
                                 "template (the Template place) is checked without an edit",
}

#: what reads as an enumeration of the op table or of the public ops in a test's source
_ENUMERATES = re.compile(r"\bOPS\.(values|items|keys)\(\)|in OPS\b|set\(OPS\)|ops\.__all__|public_ops\(|"
                         r"\bew\.(UNARY|BINARY)\b|elementwise\.(UNARY|BINARY)\b|\bTEMPLATES\b")

#: public ops whose docstring lacks a Returns or Raises section (a ledger: it may only shrink)
DOCS_WITHOUT_SECTIONS: frozenset[str] = frozenset({
    "PartitionId", "ReplicaId", "GetTupleElement", "Conv", "Clamp", "Eq", "Ge", "Gt", "Le", "Lt", "Ne",
    "Reciprocal", "Dot", "Broadcast", "BroadcastInDim", "ConcatInDim", "Reshape", "Transpose", "ConstantLiteral",
    "ReduceWindowWithGeneralPadding", "ApproxTopKFallback",
})


def items(text: str) -> list[tuple[str, str]]:
    """The ``(label, text)`` of each numbered item of the "Adding an op" section of ``text``, in
    order (an item numbered out of order or a missing section: an empty label)."""
    if SECTION not in text:
        return []
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"^(\d+)\. \*\*(.+?)\*\*(.*?)(?=^\d+\. |\Z)", body, re.M | re.S)
    return [(label if int(n) == k else "", " ".join(rest.split())) for k, (n, label, rest) in enumerate(found, 1)]


def problems(text: str) -> list[str]:
    """What the list in ``text`` gets wrong against :data:`PLACES` (empty: nothing)."""
    got = items(text)
    out = []
    if [label for label, _ in got] != list(PLACES):
        out.append(f"the items are {[label for label, _ in got]}, expected {list(PLACES)} (numbered 1, 2, ...)")
    for label, body in got:
        place = PLACES.get(label)
        if place is None:
            continue
        out += [f"{label}: does not name {name}" for name in place.names if name not in body]
        if place.test is not None and f"Test: `{place.test}`" not in body and place.test not in body:
            out.append(f"{label}: does not name its test {place.test}")
        if place.test is None and "*reviewed*" not in body:
            out.append(f"{label}: no test asks for it: mark it *reviewed*")
    return out


def completeness_files() -> list[str]:
    """The test files (under ``tests/``) whose source enumerates the op table or the public ops."""
    return sorted(str(f.relative_to(ROOT)) for f in (ROOT / "tests").rglob("*.py")
                  if f.name != "test_contributing.py" and _ENUMERATES.search(f.read_text()))


def test_the_list_names_every_place_and_its_test() -> None:
    assert not problems(CONTRIBUTING.read_text()), "\n".join(problems(CONTRIBUTING.read_text()))


def test_a_list_that_leaves_a_place_out_is_named() -> None:
    text = CONTRIBUTING.read_text()
    (differential,) = re.findall(r"^\d+\. \*\*Differential\*\*.*?(?=^\d+\. )", text, re.M | re.S)
    cut = text.replace(differential, "")
    assert any("Differential" in p for p in problems(cut))
    renumbered = re.sub(r"^10\. \*\*Props", "9. **Props", cut, flags=re.M)
    assert any("'Differential'" in p for p in problems(renumbered))
    assert problems(text.replace("`tests/test_op_props.py`", "the props test"))
    assert problems(text.replace(SECTION, "## Adding an op: the three files you touch")) != []


def test_each_place_s_test_asks_for_it() -> None:
    """The named test functions exist in the named files (a rename or a move fails here)."""
    gone = [f"{p.test}::{check}" for p in PLACES.values() if p.test is not None for check in p.checks
            if not re.search(rf"^def {check}\(", (ROOT / p.test).read_text(), re.M)]
    assert not gone, f"tests named in PLACES that no longer exist: {gone}"
    assert all(p.checks for p in PLACES.values() if p.test is not None)


def test_every_completeness_test_is_a_place() -> None:
    """A test file that enumerates the op table or the public ops asks something of a new op: the
    list must name it (or NOT_PLACES say why it asks nothing)."""
    found = completeness_files()
    tests = {p.test for p in PLACES.values()} | set(NOT_PLACES)
    assert len(found) >= 10  # the search reads what it should
    unknown = sorted(set(found) - tests)
    assert not unknown, (f"test files that enumerate the op table or the public ops, named by no item of "
                         f"CONTRIBUTING.md's 'Adding an op' list: {unknown}: add the place they ask for there and in "
                         "PLACES (or a line in NOT_PLACES saying why they ask nothing of a new op)")
    stale = sorted(set(NOT_PLACES) - set(found))
    assert not stale, f"NOT_PLACES names files that enumerate no ops: {stale}"


def _public_ops() -> list[str]:
    return [n for n in ops.__all__ if callable(getattr(ops, n)) and not inspect.isclass(getattr(ops, n))]


def test_every_public_op_has_its_docstring() -> None:
    """Each public op says what it computes; its Returns and Raises sections are there (but for the
    ledger, which may only shrink)."""
    docs = {n: inspect.getdoc(getattr(ops, n)) or "" for n in _public_ops()}
    assert len(docs) > 150
    empty = sorted(n for n, d in docs.items() if len(d.split("\n", 1)[0]) < 10)
    assert not empty, f"public ops without a docstring: {empty}"
    lacking = {n for n, d in docs.items()
               if not re.search(r"^Returns\b", d, re.M) or not re.search(r"^Raises\b", d, re.M)}
    new = sorted(lacking - DOCS_WITHOUT_SECTIONS)
    assert not new, f"public ops whose docstring lacks a Returns or Raises section: {new}"
    done = sorted(DOCS_WITHOUT_SECTIONS - lacking)
    assert not done, f"in DOCS_WITHOUT_SECTIONS but documented now: remove them: {done}"
