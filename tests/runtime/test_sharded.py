"""SPMD execution in one process (xlasdk/runtime/sharded.py): Executable.execute_sharded, xs.ShardedArray
and xs.shard on 4 and 8 CPU devices, checked against numpy."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk.sharding import HloSharding

REPO = Path(__file__).resolve().parents[2]
F32 = np.float32


def f32(*dims: int) -> xs.Shape:
    return xs.Shape.array_shape(F32, dims)


def rand(*dims: int, seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(dims).astype(F32)


def devices(n: int) -> list[xs.Device]:
    return xs.client("cpu", num_devices=n).devices()


def compile_spmd(comp: xs.XlaComputation, n: int, replicas: int = 1) -> xs.Executable:
    return xs.compile(comp, devices(n * replicas)[0], options=xs.CompileOptions(num_replicas=replicas,
                                                                                  num_partitions=n))


def matmul(
    x_sh: str | None, w_sh: str | None, y_sh: str | None, m: int = 8, k: int = 16, n: int = 8
) -> xs.XlaComputation:
    b = xs.XlaBuilder("mm")
    with b.sharding(x_sh):
        x = ops.Parameter(b, 0, f32(m, k), "x")
    with b.sharding(w_sh):
        w = ops.Parameter(b, 1, f32(k, n), "w")
    with b.sharding(y_sh):
        y = ops.Dot(x, w)
    return b.build(y)


def partial(ndev: int, ways: int, dim: int, rank: int = 2) -> str:
    """A sharding of a rank-``rank`` array split ``ways`` ways along ``dim`` over ``ndev`` devices
    (replicated over the rest with ``last_tile_dim_replicate``)."""
    dims = [1] * rank
    dims[dim] = ways
    if ways == ndev:
        return str(HloSharding.tile(dims))
    return str(HloSharding.tile([*dims, ndev // ways], last_tile_dim_replicate=True))


# -- matmul partitioned on each dimension ---------------------------------------------------------
@pytest.mark.parametrize("ndev", [4, 8])
@pytest.mark.parametrize("ways", [2, 4])
@pytest.mark.parametrize("split", ["M", "K", "N"])
def test_matmul_partitioned_on_each_dimension(ndev: int, ways: int, split: str) -> None:
    m, k, n = 8, 16, 12
    if split == "M":  # rows of x and of the result
        x_sh, w_sh, y_sh = partial(ndev, ways, 0), "{replicated}", partial(ndev, ways, 0)
    elif split == "K":  # the contracted dimension: XLA all-reduces the partial products
        x_sh, w_sh, y_sh = partial(ndev, ways, 1), partial(ndev, ways, 0), "{replicated}"
    else:  # columns of w and of the result
        x_sh, w_sh, y_sh = "{replicated}", partial(ndev, ways, 1), partial(ndev, ways, 1)
    exe = compile_spmd(matmul(x_sh, w_sh, y_sh, m, k, n), ndev)
    x, w = rand(m, k, seed=1), rand(k, n, seed=2)
    out = exe.execute_sharded([x, w])
    assert isinstance(out, xs.ShardedArray)
    assert out.sharding == y_sh and out.shape == (m, n) and out.dtype == F32 and len(out.shards) == ndev
    np.testing.assert_allclose(out.to_numpy(), x @ w, rtol=1e-5, atol=1e-5)
    # Each device holds exactly its tile of the product.
    full = x @ w
    for dev, (shard, sl) in enumerate(zip(out.shards, HloSharding.parse(y_sh).shard_slices((m, n), ndev),
                                          strict=True)):
        assert shard.device == exe.devices[dev] and shard.shape == out.shard_shape
        assert sl is not None
        np.testing.assert_allclose(shard.to_numpy(), full[sl], rtol=1e-5, atol=1e-5)
    # The same run from per-device shards and from device-resident ShardedArrays.
    x_parts = [x[sl] for sl in HloSharding.parse(x_sh).shard_slices((m, k), ndev) if sl is not None]
    w_parts = [w[sl] for sl in HloSharding.parse(w_sh).shard_slices((k, n), ndev) if sl is not None]
    out2 = exe.execute_sharded([x_parts, w_parts])
    np.testing.assert_allclose(out2.to_numpy(), x @ w, rtol=1e-5, atol=1e-5)
    out3 = exe.execute_sharded([xs.shard(x, x_sh, exe.devices), xs.shard(w, w_sh, exe.devices)])
    np.testing.assert_allclose(out3.to_numpy(), x @ w, rtol=1e-5, atol=1e-5)


def test_matmul_on_a_2d_mesh_with_replication_on_one_axis() -> None:
    """8 devices as a 2x4 mesh: x split over the first axis and replicated over the second, w split
    over the second axis and replicated over the first, the product tiled 2x4."""
    x_sh = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"
    w_sh = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
    y_sh = "{devices=[2,4]<=[8]}"
    exe = compile_spmd(matmul(x_sh, w_sh, y_sh, 8, 16, 8), 8)
    x, w = rand(8, 16, seed=3), rand(16, 8, seed=4)
    xa, wa = xs.shard(x, x_sh, exe.devices), xs.shard(w, w_sh, exe.devices)
    assert xa.shard_shape == (4, 16) and wa.shard_shape == (16, 2)
    # Devices 0..3 hold the first half of x's rows, 4..7 the second; w's column block j on devices j and j + 4.
    for d in range(8):
        np.testing.assert_array_equal(xa.shards[d].to_numpy(), x[4 * (d // 4): 4 * (d // 4) + 4])
        np.testing.assert_array_equal(wa.shards[d].to_numpy(), w[:, 2 * (d % 4): 2 * (d % 4) + 2])
    out = exe.execute_sharded([xa, wa])
    assert out.sharding == y_sh and out.shard_shape == (4, 2)
    np.testing.assert_allclose(out.to_numpy(), x @ w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ndev", [4, 8])
@pytest.mark.parametrize("axis", [0, 1])
def test_partitioned_reduction(ndev: int, axis: int) -> None:
    """A sum over one dimension of an array split along dimension 0: over the split dimension
    XLA adds the partial sums across devices (an all-reduce), over the other it stays local."""
    b = xs.XlaBuilder("reduce")
    with b.sharding(HloSharding.tile([ndev, 1])):
        x = ops.Parameter(b, 0, f32(2 * ndev, 6), "x")
    out_sh = "{replicated}" if axis == 0 else str(HloSharding.tile([ndev]))
    with b.sharding(out_sh):
        r = ops.Reduce(b, x, ops.Constant(b, F32(0)), lambda a, c: a + c, [axis])
    with b.sharding(out_sh):
        m = ops.Reduce(b, x, ops.Constant(b, F32(-np.inf)), lambda a, c: ops.Max(a, c), [axis])
    exe = compile_spmd(b.build([r, m]), ndev)
    xv = rand(2 * ndev, 6, seed=5)
    s, mx = exe.execute_sharded([xv])
    assert s.sharding == out_sh == mx.sharding
    np.testing.assert_allclose(s.to_numpy(), xv.sum(axis=axis), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(mx.to_numpy(), xv.max(axis=axis))


# -- shard / assemble ---------------------------------------------------------------------------
ROUND_TRIP = [
    ("{devices=[4,1]0,1,2,3}", (8, 6)),
    ("{devices=[1,4]0,1,2,3}", (2, 8)),
    ("{devices=[2,2]0,1,2,3}", (4, 6)),
    ("{devices=[2,2]<=[2,2]T(1,0)}", (4, 6)),
    ("{devices=[2,2]3,1,2,0}", (6, 2)),
    ("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}", (4, 3)),
    ("{devices=[4]<=[4]}", (12,)),
    ("{replicated}", (3, 5)),
    ("{maximal device=2}", (3,)),
    ("{devices=[2,2,1]<=[4]}", (2, 4, 3)),
]


@pytest.mark.parametrize(("sharding", "dims"), ROUND_TRIP)
@pytest.mark.parametrize("dtype", [np.float32, np.int8, ml_dtypes.bfloat16, np.complex64])
def test_shard_and_assemble_round_trip(sharding: str, dims: tuple[int, ...], dtype: Any) -> None:
    devs = devices(4)
    value = (np.arange(np.prod(dims)).reshape(dims) % 100).astype(dtype)
    a = xs.shard(value, sharding, devs)
    s = HloSharding.parse(sharding)
    assert a.sharding == s and a.shape == dims and a.dtype == value.dtype and a.devices == tuple(devs)
    assert a.num_partitions == 4 and a.num_replicas == 1 and a.nbytes == value.nbytes
    for dev, (shard, sl) in enumerate(zip(a.shards, s.shard_slices(dims, 4), strict=True)):
        assert shard.device == devs[dev] and shard.shape == a.shard_shape
        if sl is not None:
            np.testing.assert_array_equal(shard.to_numpy(), value[sl])
    got = a.to_numpy()
    assert got.dtype == value.dtype and not got.flags.writeable
    np.testing.assert_array_equal(got, value)
    np.testing.assert_array_equal(np.asarray(a), value)
    back = xs.ShardedArray.from_shards(a.shards, sharding, dims)
    np.testing.assert_array_equal(back.to_numpy(), value)


def test_uneven_dimensions_are_padded_as_xla_expects() -> None:
    devs = devices(4)
    value = np.arange(7 * 3, dtype=F32).reshape(7, 3)
    a = xs.shard(value, "{devices=[4,1]<=[4]}", devs)
    assert a.shard_shape == (2, 3)
    np.testing.assert_array_equal(a.shards[3].to_numpy(), [[18, 19, 20], [0, 0, 0]])
    np.testing.assert_array_equal(a.to_numpy(), value)
    b = xs.XlaBuilder("uneven")
    with b.sharding("{devices=[4,1]<=[4]}"):
        y = ops.Tanh(ops.Parameter(b, 0, f32(7, 3), "x"))
    exe = compile_spmd(b.build(y), 4)
    for arg in (value, a):
        out = exe.execute_sharded([arg])
        assert out.shard_shape == (2, 3)
        np.testing.assert_allclose(out.to_numpy(), np.tanh(value), rtol=1e-6)


def test_replicas_times_partitions() -> None:
    """num_replicas=2 x num_partitions=2: replicated parameters and results; each replica gets its
    own values from per-device shards; an inner op is partitioned."""
    b = xs.XlaBuilder("rp")
    x = ops.Parameter(b, 0, f32(4, 4), "x")
    with b.sharding("{devices=[2,1]0,1}"):
        y = ops.Tanh(x)
    z = ops.Add(y, ops.ConvertElementType(ops.ReplicaId(b), F32))
    exe = compile_spmd(b.build(z), 2, replicas=2)
    assert len(exe.devices) == 4
    x0, x1 = rand(4, 4, seed=6), rand(4, 4, seed=7)
    out = exe.execute_sharded([[x0, x0, x1, x1]])
    assert out.num_replicas == 2 and out.num_partitions == 2 and out.sharding == "{replicated}"
    got = [s.to_numpy() for s in out.shards]
    for dev, (xv, rid) in enumerate([(x0, 0), (x0, 0), (x1, 1), (x1, 1)]):
        np.testing.assert_allclose(got[dev], np.tanh(xv) + rid, rtol=1e-6)
    np.testing.assert_allclose(out.to_numpy(), np.tanh(x0), rtol=1e-6)  # replica 0's value
    whole = exe.execute_sharded([x0])  # one global value: every device gets it
    np.testing.assert_allclose(whole.shards[3].to_numpy(), np.tanh(x0) + 1, rtol=1e-6)
    a = xs.shard(x0, "{devices=[2,1]0,1}", devices(4), num_replicas=2)
    assert a.num_replicas == 2 and [s.shape for s in a.shards] == [(2, 4)] * 4
    np.testing.assert_array_equal(a.shards[3].to_numpy(), x0[2:])
    np.testing.assert_array_equal(a.to_numpy(), x0)


def test_maximal_and_tuple_results() -> None:
    b = xs.XlaBuilder("maximal")
    with b.sharding("{devices=[4,1]<=[4]}"):
        x = ops.Parameter(b, 0, f32(8, 2), "x")
    with b.sharding("{maximal device=2}"):
        y = ops.Neg(x)
    with b.sharding("{devices=[1,4]<=[4]}" if False else "{devices=[4,1]<=[4]}"):
        z = ops.Abs(x)
    exe = compile_spmd(b.build([y, z]), 4)
    xv = rand(8, 2, seed=8)
    y_out, z_out = exe.execute_sharded([xv])
    assert y_out.sharding == "{maximal device=2}" and y_out.shard_shape == (8, 2)
    np.testing.assert_array_equal(y_out.shards[2].to_numpy(), -xv)
    np.testing.assert_array_equal(y_out.to_numpy(), -xv)
    np.testing.assert_array_equal(z_out.to_numpy(), np.abs(xv))


def test_manual_sharding_is_per_device() -> None:
    """``{manual}``: the program is already per device; values go in and come out per device."""
    b = xs.XlaBuilder("manual")
    with b.sharding("{manual}"):
        x = ops.Parameter(b, 0, f32(2, 3), "x")
        y = ops.Mul(x, x)
    exe = compile_spmd(b.build(y), 4)
    parts = [np.full((2, 3), k, F32) for k in range(4)]
    out = exe.execute_sharded([parts])
    assert out.sharding == "{manual}" and out.shard_shape == (2, 3)
    assert [float(s.to_numpy()[0, 0]) for s in out.shards] == [0, 1, 4, 9]
    with pytest.raises(xs.XlaRuntimeError, match="no global value: read its per-device values from .shards"):
        out.to_numpy()
    with pytest.raises(xs.ShapeError, match=r"'x'\) has the sharding \{manual\}, which has no global value"):
        exe.execute_sharded([np.ones((2, 3), F32)])
    again = exe.execute_sharded([out])  # a manual ShardedArray on the same devices passes as it is
    assert [float(s.to_numpy()[0, 0]) for s in again.shards] == [0, 1, 16, 81]


def test_outputs_feed_the_next_run_without_copies() -> None:
    b = xs.XlaBuilder("step")
    with b.sharding("{devices=[4,1]<=[4]}"):
        x = ops.Parameter(b, 0, f32(8, 8), "x")
        y = ops.Mul(x, 0.5)
    exe = compile_spmd(b.build(y), 4)
    xv = rand(8, 8, seed=9)
    a = exe.execute_sharded([xv])
    ptrs = [s.unsafe_buffer_pointer() for s in a.shards]
    g = a._global_array()
    b2 = exe.execute_sharded([a])
    assert a._global_array() is g and [s.unsafe_buffer_pointer() for s in a.shards] == ptrs
    for _ in range(3):
        b2 = exe.execute_sharded([b2])
    np.testing.assert_allclose(b2.to_numpy(), xv / 32, rtol=1e-6)
    other = xs.shard(xv, "{devices=[1,4]<=[4]}", exe.devices)  # another sharding: resharded on the host
    np.testing.assert_allclose(exe.execute_sharded([other]).to_numpy(), xv / 2, rtol=1e-6)
    a.delete()
    assert a.is_deleted() and all(s.is_deleted() for s in a.shards)
    with pytest.raises(xs.XlaRuntimeError, match="deleted"):
        exe.execute_sharded([a])
    with pytest.raises(xs.XlaRuntimeError, match="deleted"):
        a.to_numpy()
    a.delete()


# -- errors -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mm4() -> xs.Executable:
    return compile_spmd(matmul("{devices=[4,1]<=[4]}", None, "{devices=[4,1]<=[4]}"), 4)


def test_wrong_number_of_arguments_or_shards(mm4: xs.Executable) -> None:
    x, w = rand(8, 16), rand(16, 8)
    with pytest.raises(xs.ShapeError, match=r"mm: expected 2 arguments \(x: f32\[8,16\], w: f32\[16,8\]\), got 1"):
        mm4.execute_sharded([x])
    with pytest.raises(xs.ShapeError, match=r"argument 0 \('x'\) is a list of 3 shards, expected one per device "
                                            r"\(4: cpu:0, cpu:1, cpu:2, cpu:3\), each f32\[2,16\] for sharding"):
        mm4.execute_sharded([[x[:2]] * 3, w])
    with pytest.raises(xs.ShapeError, match="takes a list of 2 arguments"):
        mm4.execute_sharded(x)  # type: ignore[arg-type]


def test_wrong_shard_or_value_shape_and_dtype(mm4: xs.Executable) -> None:
    x, w = rand(8, 16), rand(16, 8)
    with pytest.raises(xs.ShapeError, match=r"mm: shard 2 \(cpu:2\) of argument 0 \('x'\) is f32\[3,16\], "
                                            r"expected f32\[2,16\]"):
        mm4.execute_sharded([[x[:2], x[2:4], x[4:7], x[6:8]], w])
    with pytest.raises(xs.DTypeError, match=r"shard 0 \(cpu:0\) of argument 1 \('w'\) is f64\[16,8\], expected f32"):
        mm4.execute_sharded([x, [w.astype(np.float64)] + [w] * 3])
    with pytest.raises(xs.ShapeError, match=r"argument 0 \('x'\) is f32\[4,16\], expected f32\[8,16\]"):
        mm4.execute_sharded([x[:4], w])
    with pytest.raises(xs.DTypeError, match=r"argument 1 \('w'\) is s32\[16,8\], expected f32\[16,8\]"):
        mm4.execute_sharded([x, w.astype(np.int32)])
    with pytest.raises(xs.DTypeError, match="argument 1 .* is a str"):
        mm4.execute_sharded([x, "w"])
    wrong = xs.shard(rand(4, 16), "{devices=[4,1]<=[4]}", mm4.devices)
    with pytest.raises(xs.ShapeError, match=r"is a ShardedArray float32\[4, 16\], expected f32\[8,16\]"):
        mm4.execute_sharded([wrong, w])
    # DeviceArray shards on the wrong device are moved; a good run still works after the errors.
    parts = [xs.device_put(x[2 * i: 2 * i + 2], "cpu:0") for i in range(4)]
    np.testing.assert_allclose(mm4.execute_sharded([parts, w]).to_numpy(), x @ w, rtol=1e-5, atol=1e-5)


def test_shardings_that_do_not_fit_the_devices() -> None:
    x = rand(8, 4)
    with pytest.raises(xs.ShapeError, match=r"shard: sharding \{devices=\[2,1\]0,1\} tiles over 2 devices, but there "
                                            r"are 4 devices: XLA needs every device"):
        xs.shard(x, "{devices=[2,1]0,1}", devices(4))
    with pytest.raises(xs.ShapeError, match=r"names device 7, but there are 4 devices"):
        xs.shard(x, "{maximal device=7}", devices(4))
    with pytest.raises(xs.ShapeError, match=r"splits 1 dimension, but shape \[8, 4\] has rank 2"):
        xs.shard(x, "{devices=[4]<=[4]}", devices(4))
    with pytest.raises(xs.ShapeError, match="no global value to split"):
        xs.shard(x, "{manual}", devices(4))
    with pytest.raises(xs.ShapeError, match="do not split into 3 replicas"):
        xs.shard(x, "{replicated}", devices(4), num_replicas=3)
    with pytest.raises(xs.ShapeError, match="a device appears twice"):
        xs.shard(x, "{replicated}", [devices(4)[0]] * 2)
    with pytest.raises(xs.ShapeError, match=r"HloSharding.parse: the tile assignment \[4, 1\] needs 4 devices, got 3"):
        xs.shard(x, "{devices=[4,1]0,1,2}", devices(4))
    with pytest.raises(xs.DTypeError, match="cannot put a str"):
        xs.shard("x", "{replicated}", devices(4))
    with pytest.raises(xs.ShapeError, match="shards are"):
        xs.ShardedArray.from_shards([xs.device_put(x[:2], d) for d in devices(4)], "{devices=[4,1]<=[4]}", (12, 4))
    with pytest.raises(TypeError, match="xs.shard"):
        xs.ShardedArray()


def test_execute_sharded_on_one_device_and_on_programs_without_shardings() -> None:
    b = xs.XlaBuilder("plain")
    y = ops.Add(ops.Parameter(b, 0, f32(3), "a"), ops.Parameter(b, 1, f32(3), "b"))
    comp = b.build(y)
    one = xs.compile(comp, "cpu:0")
    out = one.execute_sharded([np.ones(3, F32), np.arange(3, dtype=F32)])
    assert out.sharding == "{replicated}" and len(out.shards) == 1
    np.testing.assert_array_equal(out.to_numpy(), [1, 2, 3])
    four = compile_spmd(comp, 4)
    out = four.execute_sharded([np.ones(3, F32), 2.0 * np.ones(3, F32)])
    assert [s.to_numpy().tolist() for s in out.shards] == [[3, 3, 3]] * 4


def _run(cmd: Sequence[str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env)


MULTI_PROCESS = """
import sys
import numpy as np
import xlasdk as xs
from xlasdk import ops

xs.distributed.initialize()
me, n = xs.process_index(), len(xs.devices())
rows = f"{{devices=[{n},1]<=[{n}]}}"
b = xs.XlaBuilder("mp_mm")
with b.sharding(rows):
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (4 * n, 8)), "x")
w = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, (8, 4)), "w")
with b.sharding(rows):
    y = ops.Dot(x, w)
with b.sharding("{replicated}"):
    s = ops.Reduce(b, y, ops.Constant(b, np.float32(0)), lambda a, c: a + c, [0])
exe = xs.compile(b.build([y, s]), options=xs.CompileOptions(num_partitions=n))
X = np.arange(4 * n * 8, dtype=np.float32).reshape(4 * n, 8) / 10
W = np.ones((8, 4), np.float32)
pos = {d: k for k, d in enumerate(exe.devices)}
ok = True
for xin in (X, xs.shard(X, rows, exe.devices)):
    yo, so = exe.execute_sharded([xin, W])
    ok &= bool(np.allclose(so.to_numpy(), (X @ W).sum(0)))  # replicated: every process has it all
    ok &= yo.local_devices == tuple(xs.local_devices()) and len(yo.shards) == len(xs.local_devices())
    for sh in yo.shards:  # this process's tiles
        k = pos[sh.device]
        ok &= bool(np.allclose(sh.to_numpy(), (X @ W)[4 * k : 4 * k + 4]))
    try:
        yo.to_numpy()
        ok = False
    except xs.XlaRuntimeError as e:
        ok &= "other processes' devices" in str(e)
print(f"process {me}: {'MATCH' if ok else 'MISMATCH'}")
xs.distributed.shutdown()
sys.exit(0 if ok else 1)
"""


def test_execute_sharded_across_processes(tmp_path: Path) -> None:
    """Two processes with two CPU devices each: a matmul split 4 ways over every process's devices;
    each process passes the global arrays and gets its own tiles (and the replicated sum whole)."""
    pytest.importorskip("xlasdk.launch")
    script = tmp_path / "spmd_two_processes.py"
    script.write_text(MULTI_PROCESS)
    r = _run([sys.executable, "-m", "xlasdk.launch", "-n", "2", "--local-device-count", "2", "--timeout", "120",
              str(script)], timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("MATCH") == 2 and "MISMATCH" not in r.stdout


def test_spmd_matmul_example() -> None:
    r = _run([sys.executable, "examples/spmd_matmul.py"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "MATCH" in r.stdout
