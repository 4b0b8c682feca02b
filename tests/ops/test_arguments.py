"""What the ops do with arguments no valid call has (issue 9: "the process must never die on
anything a user can pass"): shapes too large for XLA, integers that would make xlasdk loop or
allocate per unit, and malformed arguments of every Python type. Each raises an xlasdk error
naming the op and the argument, at the caller's line, never a raw Python exception, never an
abort inside XLA.

The op-call campaign (tests/campaigns/test_op_calls.py) calls every op with such arguments at
random; these are the cases it found, each pinned down.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import raises, run
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError, XlaSdkError
from xlasdk.ops import elementwise as ew

F32 = np.float32


def param(b: xs.XlaBuilder, i: int, dtype: Any, dims: tuple[int, ...]) -> xs.XlaOp:
    return ops.Parameter(b, i, xs.Shape.array_shape(dtype, dims))


def _deep(n: int) -> list[Any]:
    v: list[Any] = [0]
    for _ in range(n):
        v = [v]
    return v


def _cycle() -> list[Any]:
    v: list[Any] = [1]
    v.append(v)
    return v


# -- the size of an array ------------------------------------------------------------------------
# XLA rejects a shape whose size or byte size overflows int64, and XLA:CPU aborts the process on
# one (and, compiling element-wise ops, on arrays of more than 2**62 elements): xlasdk allows at
# most 2**62 bytes per array and per computation.


def test_shapes_over_the_limit_are_refused_when_made() -> None:
    S = xs.Shape.array_shape
    with raises(ShapeError, "Shape.array_shape", "f32[4611686018427387904,4] is too large", "2**62"):
        S(F32, (2**62, 4))
    with raises(ShapeError, "Shape.array_shape", "too large"):
        S(np.int8, (2**63 - 1,))
    with raises(ShapeError, "Shape.array_shape", "too large"):
        S(np.int8, (2**62 + 1,))
    with raises(ShapeError, "Shape.array_shape", "too large"):
        S(F32, (2**63,))
    with raises(ShapeError, "too large"):  # XLA multiplies in order: it overflows
        S(F32, (0, 2**62, 2**62))
    with raises(ShapeError, "16 byte(s) per element"):
        S(np.complex128, (2**59,))
    assert S(np.int8, (2**62,)).dimensions() == (2**62,)  # the largest array
    assert S(F32, (2**60, 0)).size() == 0
    assert xs.shape.MAX_ARRAY_BYTES == 2**62


def test_results_over_the_limit_are_refused_by_the_op() -> None:
    b = xs.XlaBuilder("big")
    x = param(b, 0, F32, (2, 3))
    with raises(ShapeError, "Iota: the result shape f32[9223372036854775807] is too large"):
        ops.Iota(b, F32, 2**63 - 1)
    with raises(ShapeError, "Broadcast: the result shape", "too large"):
        ops.Broadcast(x, [2**62, 2**62])
    with raises(ShapeError, "BroadcastInDim", "too large"):
        ops.BroadcastInDim(x, [2**61, 2, 3], [1, 2])
    col, row = param(b, 1, F32, (2**40, 1)), param(b, 2, F32, (1, 2**40))
    with raises(ShapeError, "Add: the result shape f32[1099511627776,1099511627776]", "too large"):
        ops.Add(col, row)
    with raises(ShapeError, "Mul", "too large"):
        ops.Mul(col, row)
    with raises(ShapeError, "Compare: the result shape", "too large"):  # comparisons report as Compare
        ops.Lt(col, row)
    big = param(b, 3, F32, (2**60,))
    with raises(ShapeError, "ConvertElementType", "c128[1152921504606846976]"):
        ops.ConvertElementType(big, np.complex128)
    with raises(ShapeError, "ConcatInDim", "too large"):
        ops.ConcatInDim(b, [big, big, big, big, big], 0)
    with raises(ShapeError, "Pad", "too large"):
        ops.Pad(x, ops.Constant(b, F32(0)), [(0, 2**62), (0, 0)])
    with raises(ShapeError, "Dot: the result shape", "too large"):
        ops.Dot(col, row)
    with raises(ShapeError, "AllGather", "too large"):
        ops.AllGather(big, 0, 8)


def test_a_computation_holds_at_most_2_62_bytes_of_arrays() -> None:
    # XLA:CPU's heap simulator puts every buffer in one int64-addressed heap and aborts when it
    # overflows (Igamma of two f32[2**30,2**30] did); build() refuses such a computation
    b = xs.XlaBuilder("heap")
    x = param(b, 0, F32, (2**30, 2**30))
    y = ops.Add(x, x)  # each array is allowed; together they are 2**63 bytes
    with raises(ShapeError, "build: the arrays of builder 'heap' add up to 9223372036854775808 bytes", "2**62"):
        b.build(y)
    # sub-computations count too
    sub = xs.XlaBuilder("body")
    z = param(sub, 0, F32, (2**29, 2**30))
    ops.Neg(z)
    body = sub.build()  # 2**62 bytes: allowed
    c = xs.XlaBuilder("caller")
    w = param(c, 0, F32, (2, 2))
    ops.Call(c, lambda v: v + 1.0, [w])
    assert c.build().program_shape().result_shape() == xs.Shape.array_shape(F32, (2, 2))
    c2 = xs.XlaBuilder("caller2")
    w2 = param(c2, 0, F32, (2**29, 2**30))
    r = ops.Call(c2, body, [w2])  # with the body's arrays: 2**63 bytes
    with raises(ShapeError, "build", "add up to", "at most 2**62 bytes"):
        c2.build(r)


def test_the_largest_arrays_compile_without_killing_the_process() -> None:
    # s8[2**62 + 1] made XLA:CPU abort (std::bad_alloc) compiling an Add; XLA:CPU of jaxlib 0.12
    # dies of SIGFPE compiling far smaller arrays (s32[2**54]). The largest arrays xlasdk builds
    # compile, or fail with a CompileError naming XLA's death, and the process carries on (run in a
    # child process, so that a regression shows as a failure here).
    code = textwrap.dedent(
        """
        import numpy as np, xlasdk as xs
        from xlasdk import ops
        for name, n, add in (("edge", 2**61, True), ("edge1", 2**62, False), ("edge2", 2**54, True)):
            b = xs.XlaBuilder(name)
            x = ops.Parameter(b, 0, xs.Shape.array_shape(np.int8, (n,)))
            if add:
                ops.Add(x, x)
            try:
                xs.compile(b.build())
                print(name, "compiled")
            except xs.CompileError as e:
                assert "XLA aborted on this program" in str(e), e
                print(name, "CompileError")
        b = xs.XlaBuilder("small")
        x = ops.Parameter(b, 0, xs.Shape.array_shape(np.int8, (3,)))
        ops.Add(x, x)
        print(xs.compile(b.build())(np.array([1, 2, 3], np.int8)).to_numpy().tolist())
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert [ln.split()[0] for ln in lines[:3]] == ["edge", "edge1", "edge2"], out.stdout
    assert all(ln.split()[1] in ("compiled", "CompileError") for ln in lines[:3]), out.stdout
    assert lines[3] == "[2, 4, 6]"


def test_shape_from_pyval_of_an_object_claiming_a_huge_shape() -> None:
    class Fake:
        shape = (2**62, 2**62)
        dtype = np.dtype(F32)

    with pytest.raises(ShapeError, match="too large"):
        xs.shape_from_pyval(Fake())


# -- integers xlasdk would loop or allocate over ---------------------------------------------------


def test_parameter_numbers_are_below_2_31_and_gaps_are_reported_without_allocating() -> None:
    b = xs.XlaBuilder("params")
    f2 = xs.Shape.array_shape(F32, (2,))
    with raises(ShapeError, "Parameter: parameter_number must be < 2**31, got 2147483648"):
        ops.Parameter(b, 2**31, f2)
    with raises(ShapeError, "Parameter", "< 2**31"):
        ops.Parameter(b, 2**63, f2)
    with raises(DTypeError, "Parameter", "parameter_number must be an int, got 1.0"):
        ops.Parameter(b, 1.0, f2)  # type: ignore[arg-type]
    with raises(DTypeError, "Parameter", "parameter_number must be an int"):
        ops.Parameter(b, np.bool_(True), f2)  # type: ignore[arg-type]
    ops.Parameter(b, 0, f2)
    ops.Parameter(b, np.int64(2**31 - 1), f2)  # numpy ints are ints
    t0 = time.perf_counter()
    # build() listed every missing number: a set of 2**31 ints
    with raises(ShapeError, "build: parameter numbers must be 0..1 without gaps; missing [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], ..."):  # noqa: E501
        b.build()
    assert time.perf_counter() - t0 < 1.0


def test_collective_counts_and_ids_are_bounded() -> None:
    # shard_count / split_count become groups [[0, ..., n-1]] written into the module: 2**31 made
    # xlasdk build a list of 2**31 ids
    b = xs.XlaBuilder("coll")
    x = param(b, 0, F32, (4, 4))
    with raises(ShapeError, "AllGather: shard_count must be <= 2**20", "2147483648"):
        ops.AllGather(x, 0, 2**31)
    with raises(ShapeError, "ReduceScatter: shard_count must be <= 2**20"):
        ops.ReduceScatter(x, ops.Add, 0, 2**31)
    with raises(ShapeError, "AllToAll: split_count must be <= 2**20"):
        ops.AllToAll(x, 0, 0, 2**31)
    with raises(ShapeError, "AllGather: shard_count must be >= 1"):
        ops.AllGather(x, 0, 0)
    with raises(ShapeError, "AllReduce", "replica ids must be < 2**20"):
        ops.AllReduce(x, ops.Add, [[0, 2**62]])
    with raises(ShapeError, "CrossReplicaSum", "exactly once", "missing [1, 2, 3"):
        ops.CrossReplicaSum(x, [[0, 2**19]])
    with raises(ShapeError, "CollectivePermute", "< 2**20"):
        ops.CollectivePermute(x, [(0, 2**31)])
    with raises(ShapeError, "AllReduce", "channel_id must be an int64"):
        ops.AllReduce(x, ops.Add, channel_id=2**63)
    assert ops.AllGather(x, np.int64(0), np.int32(1)).shape == x.shape  # numpy ints are ints


def test_decompositions_do_no_host_work_per_row() -> None:
    # SVD of a (1, 2**31) matrix built a numpy array of 2**31 ones (8 GiB); Eigh of a
    # (2**30, 2**30) one a Python list of 2**30 ints for its round-robin order
    b = xs.XlaBuilder("decomp")
    wide = param(b, 0, F32, (1, 2**31))
    with raises(ShapeError, "SVD: operand 'a' is f32[1,2147483648]: its larger dimension (2147483648) must be at most 65536"):  # noqa: E501
        ops.SVD(wide)
    with raises(ShapeError, "QR", "number of rows (2147483648) must be at most 65536"):
        ops.QR(ops.Transpose(wide, [1, 0]))
    t0 = time.perf_counter()
    u, s, v = ops.SVD(wide, full_matrices=False)
    vecs, vals = ops.Eigh(param(b, 1, F32, (2**30, 2**30)))
    assert time.perf_counter() - t0 < 5.0
    assert (u.dims, s.dims, v.dims) == ((1, 1), (1,), (2**31, 1))
    assert (vecs.dims, vals.dims) == ((2**30, 2**30), (2**30,))
    with raises(ShapeError, "Eigh: max_iter must be < 2**31"):
        ops.Eigh(param(b, 2, F32, (3, 3)), max_iter=2**31)
    with raises(ShapeError, "SVD: epsilon must be in [0, 1)"):
        ops.SVD(param(b, 3, F32, (3, 2)), epsilon=10**400)


def test_decompositions_xla_expands_are_at_most_65536_wide() -> None:
    # XLA:CPU's Cholesky, TriangularSolve and QR expanders unroll a block of ops per 128 rows:
    # compiling a (2**27, 2**27) QR ran for over 10 minutes and grew past 6 GB
    b = xs.XlaBuilder("expanders")
    big = param(b, 0, F32, (2**16 + 1, 2**16 + 1))
    tall = param(b, 1, F32, (2**20, 4))
    with raises(ShapeError, "Cholesky: operand 'a' is f32[65537,65537]: its size (65537) must be at most 65536"):
        ops.Cholesky(big)
    with raises(ShapeError, "TriangularSolve: operand 'a'", "at most 65536"):
        ops.TriangularSolve(big, big)
    with raises(ShapeError, "QrDecomposition", "smaller dimension (65537)"):
        ops.QrDecomposition(big)
    with raises(ShapeError, "QR: operand 'operand' is f32[1048576,4]: its number of rows (1048576)"):
        ops.QR(tall)
    with raises(ShapeError, "SVD", "larger dimension (1048576)"):
        ops.SVD(tall)
    with raises(ShapeError, "ProductOfElementaryHouseholderReflectors", "number of columns (65537)"):
        ops.ProductOfElementaryHouseholderReflectors(big, param(b, 2, F32, (2**16 + 1,)))
    # the reduced forms only expand over the smaller dimension; Eigh and LU expand nothing
    assert [o.dims for o in ops.QR(tall, full_matrices=False)] == [(2**20, 4), (4, 4)]
    assert ops.SVD(tall, full_matrices=False)[1].dims == (4,)
    assert ops.Cholesky(param(b, 3, F32, (2**16, 2**16))).dims == (2**16, 2**16)
    assert ops.Eigh(big)[1].dims == (2**16 + 1,)


def test_decompositions_still_compute() -> None:
    # the round-robin order is now kept as runs of rows: results unchanged
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 5)).astype(F32)
    a = a + a.T
    m = rng.standard_normal((6, 3)).astype(F32)
    b = xs.XlaBuilder("decomp_values")
    v, w = ops.Eigh(param(b, 0, F32, (5, 5)))
    u, s, vv = ops.SVD(param(b, 1, F32, (6, 3)))
    vecs, vals, uu, ss, vs = run(b.build([v, w, u, s, vv]), a, m)
    np.testing.assert_allclose(vals, np.linalg.eigvalsh(a), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(vecs @ np.diag(vals) @ vecs.T, a, atol=1e-4)
    np.testing.assert_allclose(ss, np.linalg.svd(m, compute_uv=False), rtol=1e-4)
    np.testing.assert_allclose(uu[:, :3] @ np.diag(ss) @ vs.T, m, atol=1e-4)


def test_cpu_clients_have_at_most_4096_devices() -> None:
    # 100000 made XLA:CPU work for minutes and gigabytes
    with pytest.raises(XlaSdkError, match=r"num_devices must be an int in \[1, 4096\] or None, got 100000"):
        xs.client("cpu", num_devices=100000)
    for bad in (0, -1, True, 2.0, "2", [2]):
        with pytest.raises(XlaSdkError, match="num_devices"):
            xs.client("cpu", num_devices=bad)  # type: ignore[arg-type]
    assert len(xs.client("cpu", num_devices=np.int64(2)).devices()) == 2


# -- malformed arguments ---------------------------------------------------------------------------

BINARY = sorted(ew.BINARY) + ["Eq", "Ne", "Lt", "Le", "Gt", "Ge"]


def _pair(b: xs.XlaBuilder, name: str) -> tuple[xs.XlaOp, xs.XlaOp]:
    allowed = ew.BINARY[name].allowed if name in ew.BINARY else ew._ALL
    dt = next(d for d in (F32, np.int32, np.bool_) if xs.dtype_to_etype(d) in allowed)
    return param(b, 0, dt, (2, 3)), param(b, 1, dt, (3,))


BAD_BROADCAST_DIMENSIONS = [
    ([[1]], "must be a sequence of ints"),
    ("1", "must be a sequence of ints"),
    ([1.0], "must be a sequence of ints"),
    ([None], "must be a sequence of ints"),
    ([True], "must be a sequence of ints"),
    ([-1], "strictly increasing dimension numbers < 2"),
    ([1, 1], "has 2 entries, expected 1"),
    ([2**63], "broadcast_dimensions[0] must be an int64"),
    ({1}, "must be a sequence of ints"),
    (np.array([[1]]), "must be a sequence of ints"),
    (np.float64(1), "must be a sequence of ints"),
    (_cycle(), "must be a sequence of ints"),
    (_deep(3000), "must be a sequence of ints"),
]


@pytest.mark.parametrize("name", BINARY)
def test_binary_ops_reject_malformed_broadcast_dimensions(name: str) -> None:
    b = xs.XlaBuilder("bd")
    x, y = _pair(b, name)
    fn = getattr(ops, name)
    reported = name if name in ew.BINARY else "Compare"  # Eq, Lt... report as Compare
    for value, words in BAD_BROADCAST_DIMENSIONS:
        with raises(ShapeError, f"{reported}: ", words):
            fn(x, y, broadcast_dimensions=value)
    with raises(ShapeError, f"{reported}: broadcast_dimensions"):
        fn(x, y, broadcast_dimensions=ops.Tuple(b, []))  # an XlaOp is no sequence (its truth value raised)
    # numpy ints and arrays are sequences of ints; None and [] mean "no mapping"
    assert fn(x, y, broadcast_dimensions=np.array([1])).dims == (2, 3)
    assert fn(x, y, broadcast_dimensions=[np.int64(1)]).dims == (2, 3)
    assert fn(x, y, broadcast_dimensions=1).dims == (2, 3)  # one int is a one-element list
    assert fn(x, x, broadcast_dimensions=[]).dims == (2, 3)


def test_int_lists_everywhere() -> None:
    b = xs.XlaBuilder("lists")
    x = param(b, 0, F32, (2, 3))
    with raises(ShapeError, "Transpose: permutation must be a sequence of ints"):
        ops.Transpose(x, [True, False])
    with raises(ShapeError, "Reshape: new_sizes must be a sequence of ints, got [nan]"):
        ops.Reshape(x, [math_nan()])
    with raises(ShapeError, "Broadcast: sizes must be a sequence of ints, got [[[[...]]]]"):
        ops.Broadcast(x, _deep(3000))
    with raises(ShapeError, "Rev: dimensions must be a sequence of ints, got '0'"):
        ops.Rev(x, "0")
    with raises(ShapeError, "Slice: strides must be a sequence of ints"):
        ops.Slice(x, [0, 0], [2, 3], (i for i in (1, 1)))
    with raises(ShapeError, "Slice: start_indices[1] must be an int64"):
        ops.Slice(x, [0, 2**63], [2, 3])
    with raises(ShapeError, "ConcatInDim: dimension must be an int, got list []"):
        ops.ConcatInDim(b, [x, x], [])
    with raises(ShapeError, "SliceInDim: stride must be an int, got bool True"):
        ops.SliceInDim(x, 0, 1, True, 0)
    with raises(ShapeError, "Pad: padding_config[0] must be (lo, hi)"):
        ops.Pad(x, ops.Constant(b, F32(0)), _cycle())
    with raises(ShapeError, "Pad: padding_config[0][1] must be an int64"):
        ops.Pad(x, ops.Constant(b, F32(0)), [(0, 2**63), (0, 0)])
    with raises(ShapeError, "Reduce: dimensions_to_reduce must be a sequence of ints"):
        ops.Reduce(b, x, ops.Constant(b, F32(0)), ops.Add, [[0]])
    assert ops.Slice(x, np.array([0, 1]), (np.int32(2), np.int64(3))).dims == (2, 2)
    assert ops.SliceInDim(x, np.int64(1), np.uint8(3), np.int16(1), np.int8(1)).dims == (2, 2)
    assert ops.TopK(x, np.int64(2)).shape.tuple_shapes()[0].dimensions() == (2, 2)
    assert ops.GetTupleElement(ops.Tuple(b, [x]), np.int32(0)) is not None


def math_nan() -> float:
    return float("nan")


def test_windows_and_convolutions_reject_malformed_paddings() -> None:
    b = xs.XlaBuilder("win")
    x = param(b, 0, F32, (1, 1, 4, 4))
    k = param(b, 1, F32, (1, 1, 2, 2))
    z = ops.Constant(b, F32(0))
    with raises(ShapeError, "ConvGeneralDilated: padding[0] must be a (lo, hi) pair of ints"):
        ops.ConvGeneralDilated(x, k, [1, 1], _deep(3000))
    with raises(ShapeError, "padding[1] must be a (lo, hi) pair"):
        ops.ConvGeneralDilated(x, k, [1, 1], [(0, 0), np.array(2)])
    with raises(ShapeError, "lhs_dilation must be a sequence of ints"):
        ops.ConvGeneralDilated(x, k, [1, 1], "SAME", np.array([[1]]))
    with raises(ShapeError, "bad dimension_numbers"):
        ops.ConvGeneralDilated(x, k, [1, 1], "SAME", None, None, _deep(3000))
    with raises(ShapeError, "ConvGeneralDilated", "do not fit in int64"):
        ops.ConvGeneralDilated(x, k, [1, 1], "VALID", [2**62, 1])
    with raises(DTypeError, "Conv: feature_group_count must be an int, got NoneType None"):
        ops.Conv(x, k, [1, 1], "SAME", feature_group_count=None)  # type: ignore[arg-type]
    with raises(ShapeError, "ReduceWindow: padding must be a sequence"):
        ops.ReduceWindow(x, z, ops.Add, [1, 1, 2, 2], [1, 1, 1, 1], np.array(None, dtype=object))
    with raises(ShapeError, "ReduceWindow", "do not fit in int64"):
        ops.ReduceWindow(x, z, ops.Add, [1, 1, 2, 2], [1, 1, 1, 1], "VALID", [1, 1, 2**62, 1])
    with raises(ShapeError, "AllReduce: replica_groups[0][0] must be an int, got list"):
        ops.AllReduce(x, ops.Add, _deep(3000))


def test_flags_and_other_scalars() -> None:
    b = xs.XlaBuilder("flags")
    x = param(b, 0, F32, (2, 3))
    t = param(b, 1, F32, (3, 3))
    with raises(DTypeError, "Cholesky: lower must be a bool, got [[[[...]]]]"):
        ops.Cholesky(t, lower=_deep(3000))
    with raises(DTypeError, "CustomCall: has_side_effect must be a bool"):
        ops.CustomCall(b, "Sharding", [x], x.shape, has_side_effect=x)
    with raises(ShapeError, "CustomCall: schedule"):
        ops.CustomCall(b, "Sharding", [x], x.shape, schedule=np.array([0, 1]))
    with raises(DTypeError, "CustomCall: backend_config must be a dict, bytes or str"):
        ops.CustomCall(b, "f", [x], x.shape, api_version=4, backend_config=7)
    with raises(ShapeError, "Iota: iota_dimension must be an int"):
        ops.Iota(b, xs.Shape.array_shape(np.int32, (2, 3)), iota_dimension=b)
    with raises(ShapeError, "Iota: iota_dimension must be an int"):
        ops.Iota(b, np.int32, 4, iota_dimension=np.array(None, dtype=object))
    with raises(ShapeError, "Map: static_operands are not supported"):
        ops.Map(b, [x], ops.Neg, [0, 1], static_operands=5)
    with raises(DTypeError, "AllReduce: use_global_device_ids must be a bool"):
        ops.AllReduce(x, ops.Add, use_global_device_ids=x)
    with raises(DTypeError, "ReducePrecision: exponent_bits must be an int, got 2.0"):
        ops.ReducePrecision(x, 2.0, 3)
    with raises(ShapeError, "ReducePrecision: exponent_bits and mantissa_bits must be < 2**31"):
        ops.ReducePrecision(x, 2**31, 3)
    with raises(DTypeError, "Add: scalar", "cannot be represented as f32"):
        ops.Add(x, 10**400)
    with raises(DTypeError, "Igamma: scalar", "cannot be represented as f32"):
        ops.Igamma(x, 10**400)
    with raises(DTypeError, "Add: scalar", "cannot be represented as f32"):
        ops.Add(x, np.str_("a"))
    with raises(DTypeError, "Constant", "ragged or mixed"):
        ops.Constant(b, [2**64])
    with raises(DTypeError, "Constant", "ragged or mixed"):
        ops.Constant(b, _deep(3000))
    with raises(DTypeError, "Constant", "ragged or mixed"):
        ops.Constant(b, _cycle())
    with raises(DTypeError, "ConvertElementType: new_element_type [1, [1, [1, [...]]]] is not an XLA element type"):
        ops.ConvertElementType(x, _cycle())


def test_callables_that_raise_name_the_op() -> None:
    b = xs.XlaBuilder("callables")
    x = param(b, 0, F32, (2, 3))
    z = ops.Constant(b, F32(0))
    with raises(DTypeError, "Reduce: computation int raised TypeError when called with (f32[], f32[])"):
        ops.Reduce(b, x, z, int, [0])
    with raises(DTypeError, "Sort: comparator <lambda> raised ZeroDivisionError"):
        ops.Sort(b, x, 0, True, lambda a, c: 1 / 0)
    with raises(DTypeError, "Map: computation must return an XlaOp"):
        ops.Map(b, [x], print, [0, 1])


def test_messages_are_short_for_huge_values() -> None:
    b = xs.XlaBuilder("short")
    x = param(b, 0, F32, (2, 3))
    with raises(ShapeError, "Transpose: permutation must be a sequence of ints") as raised:
        ops.Transpose(x, list(range(4000)) + [None])
    msg = str(raised.value)
    assert len(msg) < 300, msg
    with raises(ShapeError, "Transpose: permutation has 100001 entries, expected at most 4096") as raised:
        ops.Transpose(x, list(range(10**5)) + [None])  # too long, before any entry is read
    msg = str(raised.value)
    assert len(msg) < 300, msg


def test_debug_print_checks_its_format_without_allocating() -> None:
    # the format was checked against numpy zeros of each operand's shape: s8[2**56] asked for 64 PiB
    b = xs.XlaBuilder("print")
    x = param(b, 0, np.int8, (2**56,))
    assert ops.DebugPrint("x={0} first={0[0]} fourth={0[3]:d}", x).shape.is_token()
    with raises(ShapeError, "DebugPrint: fmt 'x={:q}' does not format 1 operands"):
        ops.DebugPrint("x={:q}", param(b, 1, F32, ()))
    with raises(DTypeError, "DebugPrint: builder must be an XlaBuilder, got XlaOp"):
        ops.DebugPrint("x={}", x, builder=x)  # type: ignore[arg-type]


def test_enum_arguments_of_any_type() -> None:
    # attribute enums were parsed by code whose error message took repr() of the value: a deeply
    # nested list raised RecursionError
    b = xs.XlaBuilder("enums")
    x = param(b, 0, F32, (2, 3))
    c = param(b, 1, np.complex64, (4, 8))
    a = param(b, 2, F32, (3, 3))
    deep, cyc = _deep(3000), _cycle()
    with raises(ShapeError, "Compare: ComparisonType must be one of FLOAT, TOTALORDER, SIGNED, UNSIGNED, got list [[[[...]]]]"):  # noqa: E501
        ops.Compare(x, x, "LT", compare_type=deep)
    with raises(ShapeError, "Compare: ComparisonDirection must be one of"):
        ops.Compare(x, x, cyc)
    with raises(ShapeError, "Compare: unknown ComparisonDirection 'XX'"):
        ops.Compare(x, x, "XX")
    with raises(ShapeError, "Fft: bad fft_type: FftType must be one of FFT, IFFT, RFFT, IRFFT"):
        ops.Fft(c, deep, [8])
    with raises(ShapeError, "RngBitGenerator: bad algorithm: RandomAlgorithm must be one of"):
        ops.RngBitGenerator(cyc, param(b, 3, np.uint64, (2,)), x.shape)
    with raises(ShapeError, "TriangularSolve: bad transpose_a:"):
        ops.TriangularSolve(a, a, transpose_a=deep)
    with raises(ShapeError, "Dot: precision_config: Precision must be one of DEFAULT, HIGH, HIGHEST"):
        ops.Dot(a, a, precision_config=_bad_precision())
    ra = xs.ResultAccuracy()
    ra.mode = cyc
    with raises(ShapeError, "Exp: result_accuracy: Mode must be one of DEFAULT, HIGHEST, TOLERANCE"):
        ops.Exp(x, result_accuracy=ra)
    ra = xs.ResultAccuracy()
    ra.atol = deep
    with raises(DTypeError, "Tanh: result_accuracy.atol must be a float, got [[[[...]]]]"):
        ops.Tanh(x, result_accuracy=ra)
    assert ops.Compare(x, x, np.int64(2), compare_type="TOTALORDER").dtype == np.bool_  # numbers name members too


def _bad_precision() -> xs.PrecisionConfig:
    pc = xs.PrecisionConfig()
    pc.operand_precision.append(_deep(3000))
    return pc


def test_attribute_objects_with_edited_fields() -> None:
    # proto-style objects can be given anything after construction; their fields are checked
    # by the op like any argument
    b = xs.XlaBuilder("edited")
    x = param(b, 0, F32, (5, 3))
    idx = param(b, 1, np.int32, (2, 1))
    g = xs.GatherDimensionNumbers(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1)
    g.offset_dims = _deep(3000)
    with raises(ShapeError, "Gather: dimension_numbers.offset_dims must be a sequence of ints"):
        ops.Gather(x, idx, g, [1, 3])
    s = xs.ScatterDimensionNumbers(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)  # noqa: E501
    s.index_vector_dim = None
    with raises(ShapeError, "Scatter: dimension_numbers.index_vector_dim must be an int"):
        ops.Scatter(x, idx, param(b, 2, F32, (2, 3)), ops.Add, s)
    img, ker = param(b, 3, F32, (1, 1, 4, 4)), param(b, 4, F32, (1, 1, 2, 2))
    cdn = xs.make_convolution_dimension_numbers(("NCHW", "OIHW", "NCHW"), 2)
    cdn.input_batch_dimension = [0]
    with raises(ShapeError, "ConvGeneralDilated: dimension_numbers.input_batch_dimension must be an int"):
        ops.ConvGeneralDilated(img, ker, [1, 1], "VALID", None, None, cdn)
    pc = xs.make_padding_config([(0, 0), (0, 0)])
    pc.dimensions[0].edge_padding_low = _cycle()
    with raises(ShapeError, "Pad: padding_config.dimensions[0].edge_padding_low must be an int"):
        ops.Pad(x, ops.Constant(b, F32(0)), pc)
    d = xs.DotDimensionNumbers()
    d.lhs_contracting_dimensions = "ab"
    with raises(ShapeError, "DotGeneral: dimension_numbers.lhs_contracting_dimensions must be a sequence of ints"):
        ops.DotGeneral(x, x, d)


def test_shapes_xla_would_refuse_when_compiling() -> None:
    # the campaign's "late" errors: accepted by the op, refused by XLA when compiling
    b = xs.XlaBuilder("late")
    big = param(b, 0, np.bool_, (2**56,))
    with raises(ShapeError, "SetDimensionSize: dimension 0 of pred[72057594037927936] has size", "< 2**31"):
        ops.SetDimensionSize(big, 3, 0)
    dyn = xs.Shape.array_shape(F32, (2,), dynamic_dimensions=[True])
    with raises(ShapeError, "InfeedWithToken: shape must have static dimensions", "f32[<=2]"):
        ops.InfeedWithToken(ops.CreateToken(b), dyn)
