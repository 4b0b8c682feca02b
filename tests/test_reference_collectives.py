"""The reference rules of the collectives (``xlasdk/reference/collectives.py``), simulated over
replicas and partitions by ``xs.evaluate_spmd``: every device's outputs against XLA:CPU running the
same program on several CPU devices, and against values computed here with numpy; one-device
``xs.evaluate``; loops and called functions (a meeting point per execution); devices that never
meet (a timeout naming the op, not a hang)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops

EPS32 = float(np.finfo(np.float32).eps)


def _xla(comp: xs.XlaComputation, per_device: list[list[Any]], replicas: int,
         partitions: int = 1) -> list[list[np.ndarray[Any, Any]]]:
    """XLA:CPU's outputs per device (replica-major), on a client of that many CPU devices."""
    dev = xs.client("cpu", num_devices=replicas * partitions).devices()[0]
    exe = xs.compile(comp, dev, options=xs.CompileOptions(num_replicas=replicas, num_partitions=partitions))
    return [[np.asarray(o) for o in (r if isinstance(r, tuple) else (r,))] for r in exe.execute_replicated(per_device)]


def _p(b: xs.XlaBuilder, i: int, dtype: Any, dims: tuple[int, ...]) -> xs.XlaOp:
    return ops.Parameter(b, i, xs.Shape.array_shape(dtype, dims))


def test_collectives_on_four_replicas_match_xla_cpu_and_numpy() -> None:
    b = xs.XlaBuilder("collectives")
    x = _p(b, 0, np.float32, (4, 2))
    n = _p(b, 1, np.int32, (3,))
    outs = [
        ops.AllReduce(x, ops.Max, [[0, 2], [1, 3]], channel_id=3),
        ops.AllGather(x, 1, 2, [[0, 1], [2, 3]]),
        ops.ReduceScatter(n, ops.Add, 0, 1, [[0], [1], [2], [3]]),
        ops.AllToAll(x, 0, 1, 2, [[3, 1], [0, 2]]),
        ops.CollectivePermute(x, [(0, 1), (1, 2), (2, 3)]),
        ops.ReplicaId(b), ops.PartitionId(b),
        ops.AllReduce(n, ops.Add),  # s32: wraps around
        ops.ReduceScatter(x, ops.Add, 0, 4),
        ops.AllReduce(x, ops.Add),
    ]
    comp = b.build(ops.Tuple(b, outs))
    rng = np.random.default_rng(0)
    xs_ = [rng.integers(-20, 20, (4, 2)).astype(np.float32) for _ in range(4)]  # sums exact in f32
    ns = [np.array([2**31 - 1, -5, 7 * r], np.int32) for r in range(4)]
    per_device = [[xs_[r], ns[r]] for r in range(4)]
    ref = xs.evaluate_spmd(comp, per_device)
    dev = _xla(comp, per_device, 4)
    for r in range(4):
        for k, (g, w) in enumerate(zip(ref[r], dev[r], strict=True)):
            assert g.dtype == w.dtype and g.shape == w.shape, (r, k)
            np.testing.assert_array_equal(g, w, err_msg=f"replica {r}, output {k}")
    # numpy's values, computed here from the operation semantics
    total = sum(x.astype(np.float64) for x in xs_)
    for r in range(4):
        grp = [0, 2] if r in (0, 2) else [1, 3]
        np.testing.assert_array_equal(ref[r][0], np.maximum(xs_[grp[0]], xs_[grp[1]]))
        pair = [0, 1] if r < 2 else [2, 3]
        np.testing.assert_array_equal(ref[r][1], np.concatenate([xs_[pair[0]], xs_[pair[1]]], axis=1))
        np.testing.assert_array_equal(ref[r][2], ns[r])
        a2a = [3, 1] if r in (3, 1) else [0, 2]
        me = a2a.index(r)
        np.testing.assert_array_equal(ref[r][3], np.concatenate([xs_[s][2 * me:2 * me + 2] for s in a2a], axis=1))
        np.testing.assert_array_equal(ref[r][4], xs_[r - 1] if r > 0 else np.zeros((4, 2), np.float32))
        assert ref[r][5] == np.uint32(r) and ref[r][5].dtype == np.uint32 and ref[r][6] == 0
        want_n = sum(v.astype(np.int64) for v in ns)
        np.testing.assert_array_equal(ref[r][7], ((want_n + 2**31) % 2**32 - 2**31).astype(np.int32))
        np.testing.assert_array_equal(ref[r][8], total[r:r + 1].astype(np.float32))
        np.testing.assert_array_equal(ref[r][9], total.astype(np.float32))


def test_float_all_reduce_is_the_sum_rounded_once() -> None:
    """Random f32 values: the reference is the float64 sum rounded once; XLA (any order) is within
    the error bound of a sum of 8 terms."""
    b = xs.XlaBuilder("sum8")
    x = _p(b, 0, np.float32, (64,))
    comp = b.build(ops.AllReduce(x, ops.Add))
    rng = np.random.default_rng(1)
    vals = [(rng.standard_normal(64) * 10.0 ** rng.integers(-3, 4)).astype(np.float32) for _ in range(8)]
    ref = xs.evaluate_spmd(comp, [[v] for v in vals])
    want = np.sum([v.astype(np.float64) for v in vals], axis=0).astype(np.float32)
    dev = _xla(comp, [[v] for v in vals], 8)
    bound = 8 * EPS32 * np.sum([np.abs(v.astype(np.float64)) for v in vals], axis=0)
    for r in range(8):
        np.testing.assert_array_equal(ref[r][0], want)
        assert np.all(np.abs(dev[r][0].astype(np.float64) - want) <= bound)


TWO_BY_TWO = """module @m {
  func.func public @main(%x: tensor<1xf32>) -> (tensor<2xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>,
                                                  tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<2xf32>) {
    %0 = "stablehlo.all_gather"(%x) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}>
        : (tensor<1xf32>) -> tensor<2xf32>
    %1 = "stablehlo.all_gather"(%x) <{all_gather_dim = 0 : i64, replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>}> : (tensor<1xf32>) -> tensor<4xf32>
    %2 = "stablehlo.all_gather"(%x) <{all_gather_dim = 0 : i64,
        replica_groups = dense<[[0, 3], [2, 1]]> : tensor<2x2xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, use_global_device_ids}>
        : (tensor<1xf32>) -> tensor<2xf32>
    %c = stablehlo.constant dense<10.0> : tensor<1xf32>
    %y = stablehlo.multiply %x, %c : tensor<1xf32>
    %xy = stablehlo.concatenate %x, %y, dim = 0 : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
    %3 = "stablehlo.all_to_all"(%xy) <{split_dimension = 0 : i64, concat_dimension = 0 : i64, split_count = 2 : i64,
        replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>}>
        : (tensor<2xf32>) -> tensor<2xf32>
    %4 = "stablehlo.collective_permute"(%x) <{source_target_pairs = dense<[[0, 1]]> : tensor<1x2xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 4, type = 1>}> : (tensor<1xf32>) -> tensor<1xf32>
    %5 = "stablehlo.collective_permute"(%x) <{source_target_pairs = dense<[[1, 0]]> : tensor<1x2xi64>}>
        : (tensor<1xf32>) -> tensor<1xf32>
    %6 = "stablehlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 5, type = 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<1xf32>) -> tensor<1xf32>
    %7 = "stablehlo.reduce_scatter"(%xy) <{scatter_dimension = 0 : i64,
        replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.maximum %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<2xf32>) -> tensor<1xf32>
    %8 = stablehlo.concatenate %7, %7, dim = 0 : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
    return %0, %1, %2, %3, %4, %5, %6, %8 : tensor<2xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<1xf32>,
        tensor<1xf32>, tensor<1xf32>, tensor<2xf32>
  }
}"""


def test_two_replicas_of_two_partitions_match_xla_cpu_and_the_group_modes() -> None:
    """Cross-replica, cross-replica-and-partition, flattened ids and cross-partition groups:
    device d (replica d // 2, partition d % 2) holds x = d."""
    comp = xs.XlaComputation.from_stablehlo(TWO_BY_TWO)
    per_device = [[np.array([float(d)], np.float32)] for d in range(4)]
    ref = xs.evaluate_spmd(comp, per_device, num_replicas=2, num_partitions=2)
    dev = _xla(comp, per_device, 2, 2)
    for d in range(4):
        for k, (g, w) in enumerate(zip(ref[d], dev[d], strict=True)):
            np.testing.assert_array_equal(g, w, err_msg=f"device {d}, output {k}")
    by_hand = [  # from the operation semantics, device by device
        [[0, 2], [2, 3, 0, 1], [0, 3], [10, 0], [0], [2], [6], [20, 20]],
        [[1, 3], [2, 3, 0, 1], [2, 1], [1, 0], [0], [3], [6], [30, 30]],
        [[0, 2], [2, 3, 0, 1], [2, 1], [30, 20], [0], [0], [6], [2, 2]],
        [[1, 3], [2, 3, 0, 1], [0, 3], [3, 2], [2], [0], [6], [3, 3]],
    ]
    for d in range(4):
        assert [v.tolist() for v in ref[d]] == by_hand[d], d


def test_replica_and_partition_ids() -> None:
    b = xs.XlaBuilder("ids")
    comp = b.build(ops.Tuple(b, [ops.ReplicaId(b), ops.PartitionId(b)]))
    got = xs.evaluate_spmd(comp, [[] for _ in range(6)], num_replicas=3, num_partitions=2)
    assert [(int(r), int(p)) for r, p in got] == [(r, p) for r in range(3) for p in range(2)]
    assert [int(v) for v in xs.evaluate(comp)] == [0, 0]


def test_one_device_evaluate_and_compare() -> None:
    """xs.evaluate is one device: a collective over a group of one; compare says match against XLA:CPU."""
    b = xs.XlaBuilder("one")
    x = _p(b, 0, np.float32, (3, 4))
    comp = b.build(ops.Tuple(b, [ops.AllReduce(x, ops.Add), ops.AllGather(x, 1, 1),
                                 ops.ReduceScatter(x, ops.Add, 0, 1), ops.AllToAll(x, 1, 0, 1),
                                 ops.CollectivePermute(x, [(0, 0)]), ops.CollectivePermute(x, []),
                                 ops.ReplicaId(b)]))
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    got = xs.evaluate(comp, a)
    for k in range(5):
        np.testing.assert_array_equal(got[k], a)
    np.testing.assert_array_equal(got[5], np.zeros_like(a))
    assert got[6] == 0
    report = xs.compare(comp, [a])
    assert report.ok, str(report)
    b = xs.XlaBuilder("two")
    x = _p(b, 0, np.float32, (2,))
    two = b.build(ops.AllGather(x, 0, 2, [[0, 1]]))
    with pytest.raises(xs.UnsupportedOpError, match=r"stablehlo.all_gather names replica ids \[1\], but the program "
                                                     r"runs on 1 replica"):
        xs.evaluate(two, np.ones(2, np.float32))


def test_all_reduce_in_a_loop_and_in_a_called_function() -> None:
    """A meeting point per execution (3 iterations of a loop), and inside a function the program calls."""
    text = """module @m {
  func.func private @twice(%v: tensor<2xi32>) -> tensor<2xi32> {
    %0 = "stablehlo.all_reduce"(%v) <{replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>}> ({
    ^bb0(%a: tensor<i32>, %b: tensor<i32>):
      %s = stablehlo.add %a, %b : tensor<i32>
      stablehlo.return %s : tensor<i32>
    }) : (tensor<2xi32>) -> tensor<2xi32>
    return %0 : tensor<2xi32>
  }
  func.func public @main(%x: tensor<2xi32>) -> tensor<2xi32> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %c3 = stablehlo.constant dense<3> : tensor<i32>
    %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<2xi32>
      cond {
        %lt = stablehlo.compare LT, %i, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        %w = func.call @twice(%v) : (tensor<2xi32>) -> tensor<2xi32>
        %id = stablehlo.replica_id : tensor<ui32>
        %idi = stablehlo.convert %id : (tensor<ui32>) -> tensor<i32>
        %idb = stablehlo.broadcast_in_dim %idi, dims = [] : (tensor<i32>) -> tensor<2xi32>
        %w2 = stablehlo.add %w, %idb : tensor<2xi32>
        %n = stablehlo.add %i, %c1 : tensor<i32>
        stablehlo.return %n, %w2 : tensor<i32>, tensor<2xi32>
      }
    return %r#1 : tensor<2xi32>
  }
}"""
    comp = xs.XlaComputation.from_stablehlo(text)
    per_device = [[np.array([1, 10 * r], np.int32)] for r in range(3)]
    ref = xs.evaluate_spmd(comp, per_device)
    vals = [np.array([1, 10 * r], np.int64) for r in range(3)]
    for _ in range(3):  # by hand: each iteration sums over the replicas, then adds the replica id
        total = sum(vals)
        vals = [total + r for r in range(3)]
    for r in range(3):
        np.testing.assert_array_equal(ref[r][0], vals[r].astype(np.int32))
    dev = _xla(comp, per_device, 3)
    for r in range(3):
        np.testing.assert_array_equal(ref[r][0], dev[r][0])


def test_devices_that_never_meet_raise_a_timeout_naming_the_op() -> None:
    """Replica 0 takes a branch with an all-reduce that replica 1 skips: an error, not a hang."""
    text = """module @m {
  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %id = stablehlo.replica_id : tensor<ui32>
    %z = stablehlo.constant dense<0> : tensor<ui32>
    %p = stablehlo.compare EQ, %id, %z : (tensor<ui32>, tensor<ui32>) -> tensor<i1>
    %r = "stablehlo.if"(%p) ({
      %s = "stablehlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %t = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %t : tensor<f32>
      }) : (tensor<2xf32>) -> tensor<2xf32>
      stablehlo.return %s : tensor<2xf32>
    }, {
      stablehlo.return %x : tensor<2xf32>
    }) : (tensor<i1>) -> tensor<2xf32>
    return %r : tensor<2xf32>
  }
}"""
    comp = xs.XlaComputation.from_stablehlo(text)
    start = time.monotonic()
    with pytest.raises(xs.CollectiveTimeoutError, match=r"device 0 \(replica 0, partition 0\): reference evaluator: "
                                                        r"stablehlo.all_reduce .* waited 0.3 s for devices \[1\]"):
        xs.evaluate_spmd(comp, [[np.ones(2, np.float32)], [np.ones(2, np.float32)]], timeout=0.3)
    assert time.monotonic() - start < 10


def test_evaluate_spmd_argument_errors() -> None:
    b = xs.XlaBuilder("id")
    x = _p(b, 0, np.float32, (2,))
    comp = b.build(ops.AllReduce(x, ops.Add))
    with pytest.raises(xs.ShapeError, match=r"3 argument lists for 2 replica\(s\) x 2 partition\(s\)"):
        xs.evaluate_spmd(comp, [[np.ones(2, np.float32)]] * 3, num_replicas=2, num_partitions=2)
    with pytest.raises(xs.ShapeError, match="num_partitions must be an int >= 1"):
        xs.evaluate_spmd(comp, [[np.ones(2, np.float32)]], num_partitions=0)
    with pytest.raises(xs.ShapeError, match=r"device 1 \(replica 1, partition 0\): evaluate: argument 0 has shape"):
        xs.evaluate_spmd(comp, [[np.ones(2, np.float32)], [np.ones(3, np.float32)]])
