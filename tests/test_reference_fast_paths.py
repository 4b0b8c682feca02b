"""The reference evaluator's numpy paths (issue 35) against its exact paths and XLA:CPU.

Each fast path (sort through ``np.lexsort`` when the comparator is read as a lexicographic order of
keys; scatter, select_and_scatter and gather through numpy's vectorized calls) must give bit for
bit what the exact path gives (the comparator or combiner evaluated element by element), which the
tests force by switching the fast path off; XLA:CPU is a second, independent oracle where its answer
is defined (stable sorts, or ties that cannot be told apart). The comparators are the ones XLA
programs hold: JAX's (NaN and -0.0 canonicalized, ``TOTALORDER``), XLA's own lexicographic
``select`` form, ``FLOAT`` compares, several keys, descending keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from xlasdk.reference import _comparator
from xlasdk.reference import sort as ref_sort

# -- comparators, as the HLO text of the region's body (parameters p0..p{2n-1}) ----------------------
_JAX_CANON = """  qnan = {t}[] constant(nan)
  zero = {t}[] constant(0)
  ne0 = pred[] compare(p0, p0), direction=NE
  eq0 = pred[] compare(p0, zero), direction=EQ
  sel0 = {t}[] select(eq0, zero, p0)
  c0 = {t}[] select(ne0, qnan, sel0)
  ne1 = pred[] compare(p1, p1), direction=NE
  eq1 = pred[] compare(p1, zero), direction=EQ
  sel1 = {t}[] select(eq1, zero, p1)
  c1 = {t}[] select(ne1, qnan, sel1)
"""

COMPARATORS: dict[str, str] = {
    # jnp.sort / argsort: canonicalized keys, LT in total order
    "jax_lt": _JAX_CANON + "  ROOT r = pred[] compare(c0, c1), direction=LT, type=TOTALORDER\n",
    # jax.lax.sort(num_keys=2): lt0 or (eq0 and lt1)
    "jax_two_keys": _JAX_CANON + """  lt0 = pred[] compare(c0, c1), direction=LT, type=TOTALORDER
  eq = pred[] compare(c0, c1), direction=EQ, type=TOTALORDER
  lt1 = pred[] compare(p2, p3), direction=LT
  a = pred[] and(eq, lt1)
  ROOT r = pred[] or(lt0, a)
""",
    "total_gt": "  ROOT r = pred[] compare(p0, p1), direction=GT, type=TOTALORDER\n",
    "total_lt_swapped": "  ROOT r = pred[] compare(p1, p0), direction=GT, type=TOTALORDER\n",
    "float_lt": "  ROOT r = pred[] compare(p0, p1), direction=LT\n",
    "float_gt": "  ROOT r = pred[] compare(p0, p1), direction=GT, type=FLOAT\n",
    # XLA's CreateScalarComparisonComputation: select(eq(key0), gt(key1), gt(key0)), key1 descending
    "xla_select_two_keys": """  gt0 = pred[] compare(p0, p1), direction=LT, type=TOTALORDER
  eq0 = pred[] compare(p0, p1), direction=EQ, type=TOTALORDER
  gt1 = pred[] compare(p2, p3), direction=GT
  ROOT r = pred[] select(eq0, gt1, gt0)
""",
    # the second operand is the primary key, the first the secondary one (descending)
    "second_operand_first": """  lt1 = pred[] compare(p2, p3), direction=LT
  eq1 = pred[] compare(p3, p2), direction=EQ
  gt0 = pred[] compare(p0, p1), direction=GT, type=TOTALORDER
  a = pred[] and(eq1, gt0)
  ROOT r = pred[] or(lt1, a)
""",
    "not_ge": """  ge = pred[] compare(p0, p1), direction=GE, type=TOTALORDER
  ROOT r = pred[] not(ge)
""",
    # not read: the caller's exact path
    "le_not_strict": "  ROOT r = pred[] compare(p0, p1), direction=LE, type=TOTALORDER\n",
    "against_constant": """  zero = {t}[] constant(0)
  a = pred[] compare(p0, zero), direction=LT
  b = pred[] compare(p1, zero), direction=GE
  ROOT r = pred[] and(a, b)
""",
    "abs_keys_differ": """  a0 = {t}[] abs(p0)
  ROOT r = pred[] compare(a0, p1), direction=LT, type=TOTALORDER
""",
    "abs_keys": """  a0 = {t}[] abs(p0)
  a1 = {t}[] abs(p1)
  ROOT r = pred[] compare(a0, a1), direction=LT, type=TOTALORDER
""",
    "mixed_types": """  lt = pred[] compare(p0, p1), direction=LT, type=TOTALORDER
  eq = pred[] compare(p0, p1), direction=EQ, type=FLOAT
  lt1 = pred[] compare(p2, p3), direction=LT
  a = pred[] and(eq, lt1)
  ROOT r = pred[] or(lt, a)
""",
    "xor_not_lex": """  a = pred[] compare(p0, p1), direction=LT, type=TOTALORDER
  b = pred[] compare(p2, p3), direction=LT
  ROOT r = pred[] xor(a, b)
""",
}
READ = {"jax_lt", "jax_two_keys", "total_gt", "total_lt_swapped", "float_lt", "float_gt", "xla_select_two_keys",
        "second_operand_first", "not_ge", "abs_keys"}
TYPES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(ml_dtypes.bfloat16): "bf16",
         np.dtype(np.int32): "s32", np.dtype(np.int8): "s8", np.dtype(np.uint64): "u64", np.dtype(np.uint32): "u32",
         np.dtype(np.bool_): "pred"}


def _module(cmp: str, dtypes: list[np.dtype[Any]], dims: tuple[int, ...], dim: int, stable: bool) -> str:
    t = TYPES[dtypes[0]]
    params = "".join(f"  p{2 * k + s} = {TYPES[d]}[] parameter({2 * k + s})\n" for k, d in enumerate(dtypes)
                     for s in (0, 1))
    shape = ",".join(map(str, dims))
    ins = [f"{TYPES[d]}[{shape}]" for d in dtypes]
    args = "".join(f"  x{k} = {s} parameter({k})\n" for k, s in enumerate(ins))
    result = ins[0] if len(ins) == 1 else f"({', '.join(ins)})"
    return (f"HloModule sorted\n\ncmp {{\n{params}{COMPARATORS[cmp].format(t=t)}}}\n\nENTRY main {{\n{args}"
            f"  ROOT s = {result} sort({', '.join(f'x{k}' for k in range(len(ins)))}), dimensions={{{dim}}}, "
            f"is_stable={'true' if stable else 'false'}, to_apply=cmp\n}}\n")


def _load(tmp_path: Path, text: str) -> xs.XlaComputation:
    p = tmp_path / "m.hlo"
    p.write_text(text)
    return xs.load_computation(p)


def _floats(rng: np.random.Generator, dims: tuple[int, ...], dtype: Any, nan: bool = True) -> np.ndarray[Any, Any]:
    """Values with many ties, both zeros, infinities and (``nan``) NaNs of both signs."""
    pool = [-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 3.0, np.inf, -np.inf]
    x = np.array(pool, np.float64)[rng.integers(0, len(pool), dims)]
    x = np.where(rng.random(dims) < 0.3, rng.standard_normal(dims), x)
    if nan:
        x = np.where(rng.random(dims) < 0.05, np.nan, x)
        x = np.where(rng.random(dims) < 0.03, -np.nan, x)
    return x.astype(dtype)


def _values(rng: np.random.Generator, dims: tuple[int, ...], dtype: np.dtype[Any], nan: bool) -> np.ndarray[Any, Any]:
    if dtype.kind == "f" or dtype == ml_dtypes.bfloat16:
        return _floats(rng, dims, dtype, nan)
    if dtype == np.bool_:
        return rng.random(dims) < 0.5
    info = np.iinfo(dtype)
    edges = np.array([info.min, info.max, 0, 1, info.max - 1], dtype)
    x = rng.integers(0, 6, dims).astype(dtype)  # ties
    return np.where(rng.random(dims) < 0.2, edges[rng.integers(0, len(edges), dims)], x).astype(dtype)


def _bits(a: np.ndarray[Any, Any]) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _fast_taken(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record, per sort evaluated, whether the lexsort path answered."""
    taken: list[bool] = []
    real = ref_sort._lexsorted

    def spy(cmp: Any, moved: Any, ev: Any) -> Any:
        got = real(cmp, moved, ev)
        taken.append(got is not None)
        return got
    monkeypatch.setattr(ref_sort, "_lexsorted", spy)
    return taken


SORT_CASES = [
    # (comparator, operand dtypes, dims, dim, stable, NaNs in the data)
    ("jax_lt", ["f32", "s32"], (257,), 0, True, True),
    ("jax_lt", ["bf16"], (9, 40), 1, True, True),
    ("jax_lt", ["f64", "s32", "f32"], (30, 7), 0, True, True),
    ("jax_two_keys", ["f32", "s32"], (300,), 0, True, True),
    ("jax_two_keys", ["f32", "s32", "f32"], (4, 5, 60), 2, True, True),
    ("total_gt", ["f32"], (200,), 0, False, True),
    ("total_gt", ["f32", "s32"], (3, 100), 1, True, True),
    ("total_lt_swapped", ["f64"], (150,), 0, False, True),
    ("float_lt", ["f32", "s32"], (200,), 0, True, False),
    ("float_lt", ["f32", "s32"], (120,), 0, True, True),  # NaN under FLOAT: not read, the exact path
    ("float_gt", ["bf16"], (2, 100), 1, True, False),
    ("xla_select_two_keys", ["f32", "s8"], (250,), 0, True, True),
    ("xla_select_two_keys", ["f32", "u64", "s32"], (6, 50), 1, True, True),
    ("second_operand_first", ["f32", "u32"], (200,), 0, True, True),
    ("not_ge", ["f32", "s32"], (100,), 0, True, True),
    ("total_gt", ["s32"], (200,), 0, False, False),
    ("total_gt", ["u64", "f32"], (200,), 0, True, False),
    ("total_gt", ["pred", "s32"], (100,), 0, True, False),
    ("abs_keys", ["f32", "s32"], (150,), 0, True, True),
    ("le_not_strict", ["f32"], (60,), 0, False, False),
    ("against_constant", ["f32", "s32"], (60,), 0, True, True),
    ("abs_keys_differ", ["f32"], (60,), 0, False, True),
    ("mixed_types", ["f32", "s32"], (80,), 0, True, False),
    ("xor_not_lex", ["f32", "s32"], (60,), 0, True, True),
]
_NAMES = {v: k for k, v in TYPES.items()}


@pytest.mark.parametrize("case", SORT_CASES, ids=[f"{c[0]}-{'-'.join(c[1])}-{c[2]}" for c in SORT_CASES])
def test_sort_fast_path_is_the_exact_path_and_xla(case: tuple[Any, ...], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cmp, names, dims, dim, stable, nan = case
    dtypes = [_NAMES[n] for n in names]
    if cmp in ("total_gt",) and dtypes[0].kind in "iub":
        text = _module(cmp, dtypes, dims, dim, stable).replace(", type=TOTALORDER", "")
    else:
        text = _module(cmp, dtypes, dims, dim, stable)
    comp = _load(tmp_path, text)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        args = [_values(rng, dims, d, nan) for d in dtypes]
        taken = _fast_taken(monkeypatch)
        fast = xs.evaluate(comp, *args)
        expect_read = cmp in READ and not (nan and cmp.startswith("float"))
        assert taken == [expect_read], (cmp, taken)
        monkeypatch.setattr(ref_sort, "_lexsorted", lambda c, m, e: None)
        exact = xs.evaluate(comp, *args)
        assert [_bits(a) for a in fast] == [_bits(a) for a in exact]
        monkeypatch.undo()
        # XLA:CPU where its answer is defined: a stable sort by a strict weak order (a comparator
        # read, no NaN under a FLOAT compare)
        if stable and expect_read:
            got = xs.compile(comp, "cpu")(*args)
            got = list(got) if isinstance(got, tuple) else [got]
            assert [_bits(np.asarray(g)) for g in got] == [_bits(a) for a in fast], (cmp, seed)


def test_large_sorts_take_the_lexsort_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """100,000 elements (the pairwise path would evaluate 10**10 pairs): XLA:CPU's answer, bit for
    bit, in well under the time that would take (a loose bound that catches the fallback)."""
    import time

    dims = (100_000,)
    comp = _load(tmp_path, _module("jax_two_keys", [np.dtype(np.float32), np.dtype(np.int32)], dims, 0, True))
    rng = np.random.default_rng(7)
    args = [_floats(rng, dims, np.float32), rng.integers(-5, 5, dims).astype(np.int32)]
    taken = _fast_taken(monkeypatch)
    t0 = time.perf_counter()
    fast = xs.evaluate(comp, *args)
    assert time.perf_counter() - t0 < 60 and taken == [True]
    got = xs.compile(comp, "cpu")(*args)
    assert [_bits(np.asarray(g)) for g in got] == [_bits(a) for a in fast]


def _region_of(tmp_path: Path, cmp: str, dtypes: list[np.dtype[Any]]) -> tuple[Any, Any]:
    from xlasdk.reference._walk import Evaluator

    comp = _load(tmp_path, _module(cmp, dtypes, (4,), 0, True))
    node = comp.instruction_graph().outputs[0]
    while node.opcode != "stablehlo.sort":
        node = node.operands[0]
    return node.regions[0], Evaluator(comp)


@pytest.mark.parametrize(("cmp", "keys"), [
    ("jax_lt", [(0, "TOTALORDER", False)]),
    ("jax_two_keys", [(0, "TOTALORDER", False), (1, "INT", False)]),
    ("total_gt", [(0, "TOTALORDER", True)]),
    ("total_lt_swapped", [(0, "TOTALORDER", False)]),
    ("float_lt", [(0, "FLOAT", False)]),
    ("xla_select_two_keys", [(0, "TOTALORDER", False), (1, "INT", True)]),
    ("second_operand_first", [(1, "INT", False), (0, "TOTALORDER", True)]),
    ("not_ge", [(0, "TOTALORDER", False)]),
    ("le_not_strict", None),
    ("against_constant", None),
    ("abs_keys_differ", None),
    ("mixed_types", None),
    ("xor_not_lex", None),
])
def test_comparators_read_as_lexicographic_keys(cmp: str, keys: list[tuple[int, str, bool]] | None,
                                                 tmp_path: Path) -> None:
    region, ev = _region_of(tmp_path, cmp, [np.dtype(np.float32), np.dtype(np.int32)])
    got = _comparator.read_comparator(region, ev)
    assert (None if got is None else [(k.operand, k.kind, k.descending) for k in got]) == keys


# -- gather and scatter: every index at once ---------------------------------------------------------
_COMBINERS = {
    "add": "ROOT c = {t}[] add(a, b)",
    "mul": "ROOT c = {t}[] multiply(b, a)",
    "max": "ROOT c = {t}[] maximum(a, b)",
    "min": "ROOT c = {t}[] minimum(a, b)",
    "replace": "ROOT c = {t}[] add(a, b)\n  ROOT2",  # replaced below: the region returns its update
    "general": "s = {t}[] add(a, b)\n  ROOT c = {t}[] multiply(s, s)",
}


def _combiner(kind: str, t: str) -> str:
    body = _COMBINERS[kind].format(t=t)
    if kind == "replace":
        body = f"ROOT c = {t}[] parameter(1)"
        return f"comb {{\n  a = {t}[] parameter(0)\n  {body}\n}}\n"
    return f"comb {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  {body}\n}}\n"


# (operand dims, index dims, index bound, update dims, the dimension numbers' HLO text)
SCATTERS = {
    "rows": ((50, 8), (300, 1), 50, (300, 8),
             "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1"),
    "windows": ((6, 7, 8), (4, 5, 2), 7, (4, 5, 3, 4),
                "update_window_dims={2,3}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0,2}, "
                "index_vector_dim=2"),
    "implicit_vector": ((20,), (40,), 20, (40,),
                        "update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                        "index_vector_dim=1"),
    "window_first": ((10, 4), (30, 1), 10, (4, 30),
                     "update_window_dims={0}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                     "index_vector_dim=1"),
    "batching": ((3, 10, 4), (3, 5, 1), 10, (3, 5, 4),
                 "update_window_dims={2}, inserted_window_dims={1}, input_batching_dims={0}, "
                 "scatter_indices_batching_dims={0}, scatter_dims_to_operand_dims={1}, index_vector_dim=2"),
}


def _scatter_module(case: str, comb: str, t: str, it: str = "s32") -> str:
    xd, idd, _, ud, dn = SCATTERS[case]
    sh = lambda d: ",".join(map(str, d))  # noqa: E731
    return (f"HloModule sc\n\n{_combiner(comb, t)}\nENTRY main {{\n  x = {t}[{sh(xd)}] parameter(0)\n"
            f"  i = {it}[{sh(idd)}] parameter(1)\n  u = {t}[{sh(ud)}] parameter(2)\n"
            f"  ROOT s = {t}[{sh(xd)}] scatter(x, i, u), {dn}, to_apply=comb\n}}\n")


def _typed(rng: np.random.Generator, dims: tuple[int, ...], t: str) -> np.ndarray[Any, Any]:
    dt = _NAMES[t]
    if dt.kind in "iu":
        return rng.integers(-3, 4, dims).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dt)
    x = _floats(rng, dims, np.float64, nan=False)
    x = np.where(rng.random(dims) < 0.03, np.nan, x)
    return x.astype(dt)


_NAMES.update({"c64": np.dtype(np.complex64), "f16": np.dtype(np.float16), "u8": np.dtype(np.uint8)})
TYPES.update({np.dtype(np.complex64): "c64", np.dtype(np.float16): "f16", np.dtype(np.uint8): "u8"})


SCATTER_CASES = [(c, k, t) for c in SCATTERS for k, t in
                 [("add", "f32"), ("add", "s32"), ("mul", "f64"), ("max", "f32"), ("min", "s32"), ("replace", "f32"),
                  ("general", "f32"), ("add", "bf16"), ("add", "c64"), ("max", "f16"), ("mul", "c64")]]


@pytest.mark.parametrize(("case", "comb", "t"), SCATTER_CASES, ids=[f"{c}-{k}-{t}" for c, k, t in SCATTER_CASES])
def test_scatter_vectorized_is_the_exact_path_and_xla(case: str, comb: str, t: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from xlasdk.reference import _at, indexing

    xd, idd, bound, ud, _ = SCATTERS[case]
    comp = _load(tmp_path, _scatter_module(case, comb, t))
    rng = np.random.default_rng(len(case) * 7 + len(comb))
    idx = rng.integers(-2, bound + 2, idd).astype(np.int32)  # some windows leave the operand: skipped
    args = [_typed(rng, xd, t), idx, _typed(rng, ud, t)]
    node = comp.instruction_graph().outputs[0]
    used = _at.combiner_at(node.regions[0], _NAMES[t]) is not None
    fast = xs.evaluate(comp, *args)
    monkeypatch.setattr(indexing, "_VECTORIZED", False)
    exact = xs.evaluate(comp, *args)
    monkeypatch.undo()
    assert [_bits(a) for a in fast] == [_bits(a) for a in exact]
    vectorized = comb != "general" and t != "bf16" and not (t == "c64" and comb == "mul") and not (
        t == "f16" and comb in ("max", "min"))
    assert bool(used) == vectorized
    if t == "s32" or comb in ("max", "min") and t != "f16" or comb == "replace" and len(np.unique(idx)) == idx.size:
        got = xs.compile(comp, "cpu")(*args)
        np.testing.assert_array_equal(np.asarray(got), fast[0])


def test_scatter_far_out_indices_are_skipped(tmp_path: Path) -> None:
    """Indices near the integer limits (a sum of start and window size must not wrap) are skipped."""
    for it, dt in (("s64", np.int64), ("u64", np.uint64), ("u8", np.uint8)):
        text = _scatter_module("rows", "add", "s32", it=it)
        comp = _load(tmp_path, text)
        info = np.iinfo(dt)
        idx = np.array([info.max, info.max - 1, info.min, 3, 49, 50] * 50, dt).reshape(300, 1)
        x = np.zeros((50, 8), np.int32)
        u = np.ones((300, 8), np.int32)
        (got,) = xs.evaluate(comp, x, idx, u)
        want = np.zeros((50, 8), np.int32)
        for v in idx[:, 0]:
            if 0 <= int(v) < 50:
                want[int(v)] += 1
        np.testing.assert_array_equal(got, want)


GATHERS = {
    "rows": ((50, 8), (300, 1), 50, "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
             "index_vector_dim=1, slice_sizes={1,8}", (300, 8)),
    "windows": ((6, 7, 8), (4, 5, 2), 8, "offset_dims={2,3}, collapsed_slice_dims={0}, start_index_map={0,2}, "
                "index_vector_dim=2, slice_sizes={1,3,4}", (4, 5, 3, 4)),
    "implicit_vector": ((20,), (40,), 20, "offset_dims={}, collapsed_slice_dims={0}, start_index_map={0}, "
                        "index_vector_dim=1, slice_sizes={1}", (40,)),
    "offset_first": ((10, 4), (30, 1), 10, "offset_dims={0}, collapsed_slice_dims={0}, start_index_map={0}, "
                     "index_vector_dim=1, slice_sizes={1,4}", (4, 30)),
    "vector_first": ((9, 6), (2, 7), 9, "offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, "
                     "index_vector_dim=0, slice_sizes={2,3}", (7, 2, 3)),
    "batching": ((3, 10, 4), (3, 5, 1), 10, "offset_dims={2}, collapsed_slice_dims={1}, operand_batching_dims={0}, "
                 "start_indices_batching_dims={0}, start_index_map={1}, index_vector_dim=2, slice_sizes={1,1,4}",
                 (3, 5, 4)),
}


@pytest.mark.parametrize("case", list(GATHERS))
@pytest.mark.parametrize("t", ["f32", "bf16", "s8"])
def test_gather_vectorized_is_the_exact_path_and_xla(case: str, t: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from xlasdk.reference import indexing

    xd, idd, bound, dn, od = GATHERS[case]
    sh = lambda d: ",".join(map(str, d))  # noqa: E731
    comp = _load(tmp_path, f"HloModule g\n\nENTRY main {{\n  x = {t}[{sh(xd)}] parameter(0)\n"
                           f"  i = s32[{sh(idd)}] parameter(1)\n  ROOT g = {t}[{sh(od)}] gather(x, i), {dn}\n}}\n")
    rng = np.random.default_rng(len(case))
    args = [_typed(rng, xd, t), rng.integers(-3, bound + 3, idd).astype(np.int32)]  # clamped
    fast = xs.evaluate(comp, *args)
    monkeypatch.setattr(indexing, "_VECTORIZED", False)
    exact = xs.evaluate(comp, *args)
    monkeypatch.undo()
    assert [_bits(a) for a in fast] == [_bits(a) for a in exact]
    got = xs.compile(comp, "cpu")(*args)
    assert _bits(np.asarray(got)) == _bits(fast[0])


# -- select_and_scatter: every window's update at once ------------------------------------------------
SELECT_AND_SCATTERS = {
    # (operand dims, source dims, window HLO text)
    "pool2x2": ((2, 8, 8, 3), (2, 4, 4, 3), "window={size=1x2x2x1 stride=1x2x2x1}"),
    "overlap3x3": ((2, 9, 9, 2), (2, 5, 5, 2), "window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}"),
}
SAS_CASES = [(c, sel, k, t) for c in SELECT_AND_SCATTERS for sel, k, t in
             [("GE", "add", "f32"), ("GT", "add", "s32"), ("GE", "max", "f32"), ("LE", "min", "s32"),
              ("GE", "mul", "f64"), ("GT", "replace", "f32"), ("GE", "general", "f32"), ("GE", "max", "bf16")]]


@pytest.mark.parametrize(("case", "sel", "comb", "t"), SAS_CASES, ids=["-".join(c) for c in SAS_CASES])
def test_select_and_scatter_vectorized_is_the_exact_path_and_xla(
        case: str, sel: str, comb: str, t: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from xlasdk.reference import window

    xd, sd, win = SELECT_AND_SCATTERS[case]
    sh = lambda d: ",".join(map(str, d))  # noqa: E731
    text = (f"HloModule sas\n\nsel {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n"
            f"  ROOT c = pred[] compare(a, b), direction={sel}\n}}\n\n{_combiner(comb, t)}\n"
            f"ENTRY main {{\n  x = {t}[{sh(xd)}] parameter(0)\n  g = {t}[{sh(sd)}] parameter(1)\n"
            f"  zero = {t}[] constant(0)\n  ROOT s = {t}[{sh(xd)}] select-and-scatter(x, g, zero), {win}, "
            f"select=sel, scatter=comb\n}}\n")
    comp = _load(tmp_path, text)
    rng = np.random.default_rng(len(case) + len(comb))
    args = [_typed(rng, xd, t), _typed(rng, sd, t)]
    if t != "s32":
        args = [np.nan_to_num(a) for a in args]  # XLA's select of a NaN is its own
    fast = xs.evaluate(comp, *args)
    monkeypatch.setattr(window, "_VECTORIZED", False)
    exact = xs.evaluate(comp, *args)
    monkeypatch.undo()
    assert [_bits(a) for a in fast] == [_bits(a) for a in exact]
    if t == "s32" or case == "pool2x2" and comb in ("add", "max", "replace") and t == "f32":
        got = xs.compile(comp, "cpu")(*args)
        # (values, not bits: the evaluator's max(0.0, -0.0) is numpy's -0.0, XLA:CPU's +0.0, before
        # this change as after it)
        np.testing.assert_array_equal(np.asarray(got), fast[0])


@pytest.mark.parametrize(("dtypes", "comparator", "read"), [
    ([np.float32, np.int32], None, True),  # ops.Sort's default: lhs_0 < rhs_0 in total order
    ([np.float32], "gt", True),  # a Python callable: ops.Gt (FLOAT)
    ([np.complex64], None, False),  # real then imaginary part: keys that are not one operand's own
])
def test_sorts_built_with_ops_take_the_same_paths(dtypes: list[Any], comparator: str | None, read: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from xlasdk import ops

    b = xs.XlaBuilder("built_sort")
    ps = [ops.Parameter(b, i, xs.Shape.array_shape(dt, (100,))) for i, dt in enumerate(dtypes)]
    cmp = (lambda a, c: ops.Gt(a, c)) if comparator == "gt" else None
    comp = b.build(ops.Sort(b, ps, is_stable=True, comparator=cmp))
    rng = np.random.default_rng(3)
    x = _floats(rng, (100,), np.float64, nan=comparator is None)
    args: list[Any] = [x.astype(np.float32), np.arange(100, dtype=np.int32)][:len(dtypes)]
    if dtypes[0] == np.complex64:
        args = [(x + 1j * rng.integers(0, 3, 100)).astype(np.complex64)]
    taken = _fast_taken(monkeypatch)
    fast = xs.evaluate(comp, *args)
    assert taken == [read]
    got = xs.compile(comp, "cpu")(*args)
    got = list(got) if isinstance(got, tuple) else [got]
    assert [_bits(np.asarray(g)) for g in got] == [_bits(a) for a in fast]
