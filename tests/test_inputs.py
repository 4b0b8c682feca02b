"""Random inputs inside the ranges a program's ops need (xlasdk.inputs), on a JAX program (jax is a
test-only peer) and a hand-written HLO module; ``xlasdk run --random-inputs --iterations``."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk.cli import main
from xlasdk.inputs import input_ranges, random_inputs

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
lax = pytest.importorskip("jax.lax")


def _program(x: Any, i: Any, j: Any, y: Any, z: Any) -> Any:
    a = lax.dynamic_slice(x, (i, j), (2, 3))
    dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1))
    t = lax.gather(x, jnp.stack([i, j])[None], dn, (1, 4), mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)
    u = lax.dynamic_update_slice(x, a, (j, i))
    return jnp.log(y) / z, jnp.sqrt(z.astype(jnp.float32)), a, t, u


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> xs.XlaComputation:
    args = (np.ones((6, 8), np.float32), np.int32(0), np.int32(0), np.ones(3, np.float32), np.ones(3, np.int32))
    path = tmp_path_factory.mktemp("inputs") / "program.mlir"
    path.write_text(jax.jit(_program).lower(*args).as_text())
    return xs.load_computation(path)


def test_ranges_are_learned_from_the_uses(program: xs.XlaComputation) -> None:
    x, i, j, y, z = input_ranges(program)
    assert x.index_max is None and not x.positive
    # i: dynamic_slice dim 0 (6 - 2), gather dims 0 and 1 (min(6 - 1, 8 - 4)), dynamic_update_slice dim 1 (8 - 3)
    assert i.index_max == 4 and j.index_max == 4  # j: 8 - 3, min(5, 4), 6 - 2
    assert any("dynamic_slice" in r for r in i.reasons) and any("gather" in r for r in i.reasons)
    assert y.positive and y.index_max is None  # log
    assert z.positive  # the divisor (through a convert) and sqrt


def test_drawn_inputs_give_values_not_clamps_or_nans(program: xs.XlaComputation) -> None:
    exe = xs.compile(program, "cpu:0")
    for seed in range(12):
        x, i, j, y, z = args = random_inputs(program, seed)
        assert 0 <= int(i) <= 4 and 0 <= int(j) <= 4 and (y > 0).all() and (z >= 1).all()
        q, r, a, t, u = (o.to_numpy() for o in exe(*args))
        assert np.isfinite(q).all() and np.isfinite(r).all()
        np.testing.assert_allclose(q, np.log(y) / z.astype(np.float32), rtol=1e-6)
        np.testing.assert_array_equal(a, x[int(i): int(i) + 2, int(j): int(j) + 3])  # in bounds: not clamped
        np.testing.assert_array_equal(t, x[int(i): int(i) + 1, int(j): int(j) + 4])
        want = x.copy()
        want[int(j): int(j) + 2, int(i): int(i) + 3] = a
        np.testing.assert_array_equal(u, want)
    assert [a.tolist() for a in random_inputs(program, 5)[1:3]] == [a.tolist() for a in random_inputs(program, 5)[1:3]]


def test_given_values_are_kept(program: xs.XlaComputation) -> None:
    y = np.array([-1, 2, 3], np.float32)
    got = random_inputs(program, 0, given=[None, None, None, y, None])
    assert got[3] is not None and got[3].tolist() == [-1, 2, 3]


def test_scatter_indices(tmp_path: Any) -> None:
    hlo = """HloModule s

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY e {
  op = f32[5,7] parameter(0)
  idx = s32[3,1] parameter(1)
  upd = f32[3,7] parameter(2)
  ROOT s = f32[5,7] scatter(op, idx, upd), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}
"""
    (tmp_path / "s.hlo").write_text(hlo)
    comp = xs.load_computation(tmp_path / "s.hlo")
    ranges = input_ranges(comp)
    assert ranges[1].index_max == 4  # 5 rows, a window of one row
    op, idx, upd = random_inputs(comp, 3)
    want = op.copy()
    for k in range(3):
        want[idx[k, 0]] += upd[k]
    np.testing.assert_allclose(xs.compile(comp, "cpu:0")(op, idx, upd).to_numpy(), want, rtol=1e-6)


def test_run_iterations_draw_fresh_inputs(program: xs.XlaComputation, tmp_path: Any) -> None:
    path = tmp_path / "p.hlo"
    path.write_text(program.as_hlo_text())
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(path), "--random-inputs", "--iterations", "3", "--seed", "7"], stdout=out,
                stderr=err) == 0, err.getvalue()
    text = out.getvalue()
    assert "iteration 0 (seed 7)" in text and "iteration 2 (seed 9)" in text
    assert "nan" not in text.lower()
    blocks = text.split("iteration ")[1:]
    assert len(blocks) == 3 and blocks[0].split(":", 1)[1] != blocks[1].split(":", 1)[1]
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(path), "--random-inputs", "--iterations", "2", "--output", str(tmp_path / "o.npz")],
                stdout=out, stderr=err) == 2
    assert "drop --iterations" in err.getvalue()


def test_ranges_are_learned_inside_an_optimized_module_s_fusions(tmp_path: Any) -> None:
    """XLA's optimized HLO of the program (its ops inside fusions, imported as called functions)
    gives the same ranges (a new user's find: they were the default draws, NaN from log)."""
    args = (np.ones((6, 8), np.float32), np.int32(0), np.int32(0), np.ones(3, np.float32), np.ones(3, np.int32))
    text = jax.jit(_program).lower(*args).compile().as_text()
    assert "fusion" in text
    path = tmp_path / "optimized.hlo"
    path.write_text(text)
    comp = xs.load_computation(path)
    x, i, j, y, z = input_ranges(comp)
    assert (i.index_max, j.index_max) == (4, 4) and y.positive and z.positive, (i, j, y, z)
    assert any("(in " in r for r in y.reasons)
    for seed in range(4):
        outs = xs.compile(comp, "cpu:0")(*random_inputs(comp, seed))
        assert all(np.isfinite(o.to_numpy()).all() for o in outs)


def test_the_missing_input_hint_needs_no_shell_quoting(tmp_path: Any) -> None:
    """A JAX parameter named ``params['b1']`` would need quoting in a shell: the hint gives its index."""
    path = tmp_path / "m.mlir"
    path.write_text("""module @m {
  func.func public @main(%arg0: tensor<2xf32> loc("params['b1']")) -> tensor<2xf32> {
    return %arg0 : tensor<2xf32>
  }
}
""")
    assert list(xs.load_computation(path).program_shape().parameter_names()) == ["params['b1']"]
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(path)], stdout=out, stderr=err) == 2
    assert "give --input 0=FILE.npy" in err.getvalue(), err.getvalue()
