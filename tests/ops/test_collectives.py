"""Tests of xlasdk/ops/collectives.py: AllReduce, AllGather, ReduceScatter, AllToAll,
CollectivePermute, CrossReplicaSum, ReplicaId, PartitionId.

Values are checked on one device (each collective has a single participant) with the test
helper, and on 4 replicas (4 CPU devices) through ``xs.compile``/``execute_replicated`` against
numpy oracles of XLA's semantics.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import param, raises, run, skip_where_device_defines_otherwise
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError
from xlasdk.ops.collectives import (
    all_gather_shape,
    all_reduce_shape,
    all_to_all_shape,
    collective_permute_shape,
    reduce_scatter_shape,
)

S = xs.Shape


def add_computation(dtype: Any) -> xs.XlaComputation:
    sb = xs.XlaBuilder("add")
    a, c = param(sb, 0, dtype, ()), param(sb, 1, dtype, ())
    return sb.build(ops.Add(a, c))


# -- one device: every collective has one participant -----------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.int64, np.complex64, np.bool_])
def test_one_device_collectives_are_identities(dtype: Any) -> None:
    if dtype in (np.float64, np.int64, np.complex64):
        skip_where_device_defines_otherwise("tpu-x64-collectives")
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 6)) * 10).astype(dtype)
    b = xs.XlaBuilder("one")
    p = param(b, 0, dtype, (4, 6))
    outs = [
        ops.AllReduce(p, add_computation(dtype)),
        ops.AllReduce(p, ops.Max if dtype not in (np.complex64,) else ops.Add, [[0]]),
        ops.AllGather(p, 1, 1),
        ops.AllGather(p, 0, 1, [[0]], channel_id=1, use_global_device_ids=True),
        ops.ReduceScatter(p, ops.Add, 0, 1),
        ops.AllToAll(p, 0, 1, 1),
        ops.AllToAll(p, 1, 1, 1, [[0]]),
        ops.CollectivePermute(p, [(0, 0)]),
        ops.CollectivePermute(p, []),
        ops.CrossReplicaSum(p),
        ops.CrossReplicaSum(p, [[0]]),
    ]
    got = run(b.build(ops.Tuple(b, outs)), x)
    for i, g in enumerate(got):
        assert g.dtype == np.dtype(dtype) and g.shape == (4, 6), i
        expected = np.zeros_like(x) if i == 8 else x  # CollectivePermute([]): nobody sends
        np.testing.assert_array_equal(g, expected, err_msg=f"output {i}")


def test_one_device_tuple_allreduce_and_bf16() -> None:
    b = xs.XlaBuilder("tup")
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    y = np.array([7.0, -1.0], np.float32)
    px, py = param(b, 0, np.float32, (2, 3)), param(b, 1, np.float32, (2,))
    r = ops.AllReduce(ops.Tuple(b, [px, py]), ops.Add)
    assert r.shape == S.tuple_shape([S.array_shape(np.float32, (2, 3)), S.array_shape(np.float32, (2,))])
    bf = ops.Constant(b, np.array([1.5, -2.25, 3.0], ml_dtypes.bfloat16))
    got = run(b.build(ops.Tuple(b, [
        ops.GetTupleElement(r, 0), ops.GetTupleElement(r, 1),
        ops.ConvertElementType(ops.CrossReplicaSum(bf), np.float32),
        ops.ConvertElementType(ops.AllGather(bf, 0, 1), np.float32),
    ])), x, y)
    np.testing.assert_array_equal(got[0], x)
    np.testing.assert_array_equal(got[1], y)
    np.testing.assert_array_equal(got[2], [1.5, -2.25, 3.0])
    np.testing.assert_array_equal(got[3], [1.5, -2.25, 3.0])


def test_replica_and_partition_id_on_one_device() -> None:
    b = xs.XlaBuilder("ids")
    r, p = ops.ReplicaId(b), ops.PartitionId(b)
    assert r.shape == S.scalar_shape(np.uint32) and p.shape == S.scalar_shape(np.uint32)
    got = run(b.build(ops.Tuple(b, [r, p])))
    assert got[0].dtype == np.uint32 and got[0].shape == () and int(got[0]) == 0
    assert got[1].dtype == np.uint32 and int(got[1]) == 0


# -- four replicas ------------------------------------------------------------------------------

Arrays = list[np.ndarray[Any, Any]]


def _four_replicas(comp: xs.XlaComputation, per_replica: list[Arrays]) -> list[Arrays]:
    dev = xs.client("cpu", num_devices=4).devices()[0]
    exe = xs.compile(comp, dev, options=xs.CompileOptions(num_replicas=4))
    outs = exe.execute_replicated(per_replica)
    return [[np.asarray(o) for o in (r if isinstance(r, tuple) else (r,))] for r in outs]


def test_four_replica_semantics() -> None:
    xsr = [(np.arange(8, dtype=np.float32).reshape(2, 4) * (r + 1) + 100 * r) for r in range(4)]
    ns = [np.array([r + 1, -r, 3 * r], np.int32) for r in range(4)]
    b = xs.XlaBuilder("rep")
    p, q = param(b, 0, np.float32, (2, 4)), param(b, 1, np.int32, (3,))
    outs = [
        ops.AllReduce(p, ops.Add),                                   # 0
        ops.AllGather(p, 0, 4),                                      # 1
        ops.ReduceScatter(p, add_computation(np.float32), 1, 4),     # 2
        ops.AllToAll(p, 1, 0, 4),                                    # 3
        ops.CollectivePermute(p, [(0, 1), (1, 2), (2, 3)]),          # 4
        ops.ReplicaId(b),                                            # 5
        ops.AllReduce(p, ops.Max, [[0, 2], [1, 3]]),                 # 6
        ops.AllGather(p, 1, 2, [[0, 1], [2, 3]]),                    # 7
        ops.CrossReplicaSum(q),                                      # 8
        ops.ReduceScatter(q, ops.Min, 0, 1, [[0], [1], [2], [3]]),   # 9
        ops.AllToAll(p, 0, 0, 2, [[3, 1], [0, 2]]),                  # 10
        ops.PartitionId(b),                                          # 11
    ]
    got = _four_replicas(b.build(ops.Tuple(b, outs)), [[x, n] for x, n in zip(xsr, ns, strict=True)])
    total = sum(xsr)
    groups = {0: [0, 2], 2: [0, 2], 1: [1, 3], 3: [1, 3]}
    pair_groups = {0: [0, 1], 1: [0, 1], 2: [2, 3], 3: [2, 3]}
    a2a_groups = {3: [3, 1], 1: [3, 1], 0: [0, 2], 2: [0, 2]}
    for r in range(4):
        g = got[r]
        np.testing.assert_array_equal(g[0], total)
        np.testing.assert_array_equal(g[1], np.concatenate(xsr, axis=0))
        np.testing.assert_array_equal(g[2], np.split(total, 4, axis=1)[r])
        np.testing.assert_array_equal(g[3], np.concatenate([np.split(xsr[j], 4, axis=1)[r] for j in range(4)], axis=0))
        np.testing.assert_array_equal(g[4], xsr[r - 1] if r >= 1 else np.zeros_like(xsr[0]))
        assert int(g[5]) == r and g[5].dtype == np.uint32
        np.testing.assert_array_equal(g[6], np.maximum(*(xsr[j] for j in groups[r])))
        np.testing.assert_array_equal(g[7], np.concatenate([xsr[j] for j in pair_groups[r]], axis=1))
        np.testing.assert_array_equal(g[8], sum(ns))
        assert g[8].dtype == np.int32
        np.testing.assert_array_equal(g[9], ns[r])
        grp = a2a_groups[r]
        k = grp.index(r)
        np.testing.assert_array_equal(g[10], np.concatenate([np.split(xsr[j], 2, axis=0)[k] for j in grp], axis=0))
        assert int(g[11]) == 0


def test_hlo_text_shows_replica_groups_and_channels() -> None:
    b = xs.XlaBuilder("hlo")
    p = param(b, 0, np.float32, (4, 8))
    outs = [
        ops.AllReduce(p, ops.Add, [[0, 1, 2, 3]]),
        ops.AllReduce(p, ops.Add, [[0, 1], [2, 3]], channel_id=5, use_global_device_ids=True),
        ops.AllGather(p, 1, 4),
        ops.AllGather(p, 0, 4, channel_id=2),
        ops.ReduceScatter(p, ops.Add, 1, 2, [[0, 2], [1, 3]]),
        ops.AllToAll(p, 0, 1, 4),
        ops.CollectivePermute(p, [(0, 1), (1, 0)], channel_id=3),
    ]
    assert [o.dims for o in outs] == [(4, 8), (4, 8), (4, 32), (16, 8), (4, 4), (1, 32), (4, 8)]
    hlo = b.build(ops.Tuple(b, outs)).as_hlo_text()
    assert "all-reduce(%p0.1), replica_groups={{0,1,2,3}}, to_apply=" in hlo
    assert "channel_id=5, replica_groups={{0,1},{2,3}}, use_global_device_ids=true" in hlo
    # AllGather without groups or channel: every replica, spelled out (shard_count replicas)
    assert "f32[4,32]{1,0} all-gather(" in hlo and "replica_groups={{0,1,2,3}}, dimensions={1}" in hlo
    # with a channel the empty groups stay (participants are replicas x partitions)
    assert "channel_id=2, replica_groups={}, dimensions={0}" in hlo
    assert "reduce-scatter(" in hlo and "replica_groups={{0,2},{1,3}}, dimensions={1}" in hlo
    assert "all-to-all(" in hlo
    assert "collective-permute(" in hlo and "channel_id=3, source_target_pairs={{0,1},{1,0}}" in hlo


def test_alltoall_without_groups_does_not_crash_the_verifier() -> None:
    # StableHLO's verifier divides by the group size: empty replica_groups on all_to_all kill
    # the process (SIGFPE). AllToAll always spells the group out.
    code = textwrap.dedent(
        """
        import numpy as np, xlasdk as xs
        from xlasdk import ops
        b = xs.XlaBuilder("a2a")
        p = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (4, 6)))
        for n in (1, 2):
            text = b.build(ops.AllToAll(p, 0, 1, n)).as_hlo_text()
            assert "all-to-all(" in text, text
        print("ok")
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().endswith("ok")


# -- shape rules --------------------------------------------------------------------------------

def test_shape_rules() -> None:
    assert all_gather_shape((2, 3), 1, 4) == (2, 12)
    assert all_gather_shape((5,), 0, 1) == (5,)
    assert reduce_scatter_shape("R", S.array_shape(np.float32, (8, 3)), 0, 4) == (2, 3)
    assert all_to_all_shape("A", S.array_shape(np.float32, (8, 3)), 0, 1, 4) == (2, 12)
    assert all_to_all_shape("A", S.array_shape(np.float32, (8, 3)), 0, 0, 2) == (8, 3)
    b = xs.XlaBuilder("s")
    p = param(b, 0, np.int8, (6, 4, 2))
    assert ops.AllGather(p, 2, 3).shape == S.array_shape(np.int8, (6, 4, 6))
    assert ops.ReduceScatter(p, ops.Add, 0, 3).shape == S.array_shape(np.int8, (2, 4, 2))
    assert ops.AllToAll(p, 1, 2, 2).shape == S.array_shape(np.int8, (6, 2, 4))
    row_major = S.array_shape(np.int8, (12, 4, 2), layout=(2, 1, 0))
    assert ops.AllGather(p, 0, 2, shape_with_layout=row_major).dims == (12, 4, 2)


# -- errors -------------------------------------------------------------------------------------

def test_errors_replica_groups_and_channels() -> None:
    b = xs.XlaBuilder("e")
    p = param(b, 0, np.float32, (4, 6))
    with raises(ShapeError, "AllReduce", "appear more than once"):
        ops.AllReduce(p, ops.Add, [[0, 1], [1, 2]])
    with raises(ShapeError, "AllReduce", "same size"):
        ops.AllReduce(p, ops.Add, [[0, 1], [2]])
    with raises(ShapeError, "CrossReplicaSum", "replica_groups [[1, 2]]", "missing [0]"):
        ops.CrossReplicaSum(p, [[1, 2]])
    with raises(ShapeError, "AllReduce", "use_global_device_ids", "channel_id"):
        ops.AllReduce(p, ops.Add, [[0]], use_global_device_ids=True)
    with raises(ShapeError, "AllGather", "use_global_device_ids=True needs explicit replica_groups"):
        ops.AllGather(p, 0, 1, channel_id=1, use_global_device_ids=True)
    with raises(ShapeError, "AllGather", "channel_id must be >= 1"):
        ops.AllGather(p, 0, 1, channel_id=0)
    with raises(ShapeError, "CollectivePermute", "channel_id must be an int"):
        ops.CollectivePermute(p, [(0, 1)], channel_id="x")
    with raises(ShapeError, "AllReduce", "replica_groups"):
        ops.AllReduce(p, ops.Add, "01")  # type: ignore[arg-type]


def test_errors_operands_and_reducers() -> None:
    b = xs.XlaBuilder("e")
    p = param(b, 0, np.float32, (4, 6))
    q = param(b, 1, np.int32, (3,))
    with raises(DTypeError, "AllReduce", "operand 'operand'", "XlaOp"):
        ops.AllReduce(np.ones(3), ops.Add)  # type: ignore[arg-type]
    with raises(ShapeError, "AllReduce", "operand 'operand'", "one element type"):
        ops.AllReduce(ops.Tuple(b, [p, q]), ops.Add)
    with raises(ShapeError, "AllReduce", "computation 'add'", "f32[]"):
        ops.AllReduce(p, add_computation(np.int32))
    with raises(ShapeError, "ReduceScatter", "computation returns (f64[])", "f32[]"):
        ops.ReduceScatter(p, lambda a, c: ops.ConvertElementType(a + c, np.float64), 0, 1)
    with raises(ShapeError, "AllReduce", "shape_with_layout is f32[6,4]", "f32[4,6]"):
        ops.AllReduce(p, ops.Add, shape_with_layout=S.array_shape(np.float32, (6, 4)))
    with raises(ShapeError, "AllGather", "shape_with_layout", "{0,1}", "default layout {1,0}"):
        ops.AllGather(p, 0, 2, shape_with_layout=S.array_shape(np.float32, (8, 6), layout=(0, 1)))
    with raises(ShapeError, "AllToAll", "layout {0,1}"):
        ops.AllToAll(p, 0, 1, 2, layout=xs.Layout((0, 1)))
    with raises(DTypeError, "ReplicaId", "XlaBuilder"):
        ops.ReplicaId(p)  # type: ignore[arg-type]
    with raises(DTypeError, "PartitionId", "XlaBuilder"):
        ops.PartitionId(None)  # type: ignore[arg-type]
    t = ops.Tuple(b, [p])
    with raises(ShapeError, "AllGather", "operand 'operand' must be an array"):
        ops.AllGather(t, 0, 1)


def test_errors_dimensions_and_counts() -> None:
    b = xs.XlaBuilder("e")
    p = param(b, 0, np.float32, (4, 6))
    with raises(ShapeError, "AllGather", "all_gather_dimension 2", "operand 'operand'", "f32[4,6]"):
        ops.AllGather(p, 2, 2)
    with raises(ShapeError, "AllGather", "shard_count must be >= 1"):
        ops.AllGather(p, 0, 0)
    with raises(ShapeError, "AllGather", "shard_count is 4", "2 members"):
        ops.AllGather(p, 0, 4, [[0, 1], [2, 3]])
    with raises(ShapeError, "ReduceScatter", "operand 'operand'", "dimension 1 (size 6)", "not divisible by shard_count 4"):  # noqa: E501
        ops.ReduceScatter(p, ops.Add, 1, 4)
    with raises(ShapeError, "ReduceScatter", "scatter_dimension -1"):
        ops.ReduceScatter(p, ops.Add, -1, 2)
    with raises(ShapeError, "AllToAll", "split dimension 1 (size 6)", "split_count 4"):
        ops.AllToAll(p, 1, 0, 4)
    with raises(ShapeError, "AllToAll", "concat_dimension 2"):
        ops.AllToAll(p, 0, 2, 2)
    with raises(ShapeError, "AllToAll", "split_count is 2", "4 members"):
        ops.AllToAll(p, 0, 1, 2, [[0, 1, 2, 3]])
    z = param(b, 1, np.float32, (0, 4))
    with raises(ShapeError, "AllGather", "operand 'operand' has shape f32[0,4]", "must not have size 0"):
        ops.AllGather(z, 0, 1)
    with raises(ShapeError, "ReduceScatter", "operand 'operand' has shape f32[0,4]", "must not have size 0"):
        ops.ReduceScatter(z, ops.Add, 0, 1)
    assert ops.AllGather(z, 1, 2).dims == (0, 8) and ops.AllToAll(z, 0, 1, 2).dims == (0, 8)
    with raises(ShapeError, "AllGather", "all_gather_dimension must be an int"):
        ops.AllGather(p, True, 1)


def test_errors_collective_permute_pairs() -> None:
    b = xs.XlaBuilder("e")
    p = param(b, 0, np.float32, (4,))
    with raises(ShapeError, "CollectivePermute", "source replica ids [0]"):
        ops.CollectivePermute(p, [(0, 1), (0, 2)])
    with raises(ShapeError, "CollectivePermute", "target replica ids [2]"):
        ops.CollectivePermute(p, [(0, 2), (1, 2)])
    with raises(ShapeError, "CollectivePermute", "source_target_pairs[0] = (0, -1)", ">= 0"):
        ops.CollectivePermute(p, [(0, -1)])
    with raises(ShapeError, "CollectivePermute", "source_target_pairs[0] must be a (source, target) pair"):
        ops.CollectivePermute(p, [(0, 1, 2)])  # type: ignore[list-item]
    with raises(ShapeError, "CollectivePermute", "source_target_pairs must be a sequence"):
        ops.CollectivePermute(p, 3)  # type: ignore[arg-type]


def test_channel_ids_beyond_num_partitions_are_a_compile_error() -> None:
    """With a channel_id, CollectivePermute and AllToAll exchange between partitions; ids past
    num_partitions made XLA:CPU abort the process (CollectivePermute) or fail at run time."""
    b = xs.XlaBuilder("cross_partition")
    x = param(b, 0, np.float32, (4, 2))
    comp = b.build(ops.CollectivePermute(x, [(0, 3), (3, 0), (1, 2), (2, 1)], channel_id=9))
    dev = xs.client("cpu", num_devices=4).devices()[0]
    with pytest.raises(xs.CompileError, match=r"CollectivePermute with a channel_id .* ids \[1, 2, 3\] are >= "
                                              r"num_partitions=1"):
        xs.compile(comp, dev, options=xs.CompileOptions(num_replicas=4))
    b2 = xs.XlaBuilder("a2a")
    y = param(b2, 0, np.float32, (4, 2))
    with pytest.raises(xs.CompileError, match=r"AllToAll with a channel_id"):
        xs.compile(b2.build(ops.AllToAll(y, 0, 0, 4, channel_id=7)), dev, options=xs.CompileOptions(num_replicas=4))
    # Without a channel the ids are replica ids, and the same permute runs.
    b3 = xs.XlaBuilder("replicas")
    z = param(b3, 0, np.float32, (4, 2))
    got = _four_replicas(b3.build(ops.CollectivePermute(z, [(0, 3), (3, 0), (1, 2), (2, 1)])),
                         [[np.full((4, 2), r, np.float32)] for r in range(4)])
    assert [float(g[0][0, 0]) for g in got] == [3.0, 2.0, 1.0, 0.0]


# -- the pure shape rules of AllReduce and CollectivePermute, without a builder ---------------------


def test_all_reduce_and_collective_permute_rules() -> None:
    f = xs.Shape.array_shape(np.float32, (2, 3))
    t = xs.Shape.tuple_shape([f, xs.Shape.array_shape(np.float32, (4,))])
    assert all_reduce_shape("AllReduce", f) == f
    assert all_reduce_shape("AllReduce", t) == t
    with raises(ShapeError, "AllReduce:", "its elements must share one element type"):
        all_reduce_shape("AllReduce", xs.Shape.tuple_shape([f, xs.Shape.scalar_shape(np.int32)]))
    with raises(ShapeError, "must be an array or a flat tuple of arrays"):
        all_reduce_shape("AllReduce", xs.Shape.tuple_shape([t]))
    with raises(ShapeError, "must be an array or a flat tuple of arrays"):
        all_reduce_shape("AllReduce", xs.Shape.tuple_shape([]))
    assert collective_permute_shape("CollectivePermute", f, [(0, 1), (1, 0)]) == f
    assert collective_permute_shape("CollectivePermute", f, []) == f
    with raises(ShapeError, "CollectivePermute:", "target replica ids [1] appear more than once"):
        collective_permute_shape("CollectivePermute", f, [(0, 1), (2, 1)])
    with raises(ShapeError, "source replica ids [0] appear more than once"):
        collective_permute_shape("CollectivePermute", f, [(0, 1), (0, 2)])
    with raises(ShapeError, "source_target_pairs[1] = (1, 1048576): replica ids must be >= 0 and < 2**20"):
        collective_permute_shape("CollectivePermute", f, [(0, 1), (1, 2**20)])
