"""Former-style tests (``from xlasdk import xla_client``, ``xla_client.XlaBuilder``,
``backend.compile``, execute, compare with numpy) of the issue 11 surface that is not buffer
interop: Python host callbacks, run-time tokens, tracebacks, the former keyword names, and the
smaller names (``Shape.element_type()``, ``ShapeIndex``, ``DeviceArrayBase``,
``DeviceAssignment.serialize``, ``_xla.hlo_module_cost_analysis``, ``RandomAlgorithm.RNG_*``).
"""

from __future__ import annotations

import io
import traceback
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import xla_client

ops = xla_client.ops
F32 = np.float32


@pytest.fixture(scope="module")
def backend() -> xla_client.Client:
    return xla_client.make_cpu_client()


def run(backend: xla_client.Client, c: xla_client.XlaBuilder, *args: Any) -> list[np.ndarray[Any, Any]]:
    return xla_client.execute_with_python_values(backend.compile(c.build()), list(args), backend)


# -- host callbacks ---------------------------------------------------------------------------------

def test_emit_python_callback(backend: xla_client.Client) -> None:
    c = xla_client.XlaBuilder("callback")
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros((2, 3), F32)))
    shapes = [xla_client.Shape.array_shape(np.dtype(F32), (3, 2)), xla_client.Shape.scalar_shape(np.dtype(np.int32))]

    def fn(a: np.ndarray[Any, Any]) -> tuple[Any, ...]:
        return a.T * 2, np.int32(a.size)

    op, keepalive = backend.emit_python_callback(fn, c, [x], shapes, operand_layouts=[None], has_side_effects=False)
    assert keepalive is not None
    assert c.get_shape(op).is_tuple()
    v = np.arange(6, dtype=F32).reshape(2, 3)
    out = run(backend, c, v)
    np.testing.assert_array_equal(out[0], v.T * 2)
    assert out[1] == 6


def test_emit_python_callback_side_effect_and_error(backend: xla_client.Client) -> None:
    seen: list[float] = []
    c = xla_client.XlaBuilder("effect")
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros(3, F32)))
    backend.emit_python_callback(lambda a: (seen.append(float(a.sum())), ())[1], c, [x], [], has_side_effects=True)
    ops.Mul(x, ops.Constant(c, F32(2)))
    np.testing.assert_array_equal(run(backend, c, np.ones(3, F32))[0], [2, 2, 2])
    assert seen == [3.0]

    c = xla_client.XlaBuilder("fails")
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros(3, F32)))

    def bad(a: np.ndarray[Any, Any]) -> tuple[Any, ...]:
        raise ZeroDivisionError("nope")

    backend.emit_python_callback(bad, c, [x], [xla_client.shape_from_pyval(np.zeros(3, F32))])
    exe = backend.compile(c.build())
    with pytest.raises(xla_client.XlaRuntimeError, match="ZeroDivisionError: nope") as ei:
        xla_client.execute_with_python_values(exe, [np.ones(3, F32)], backend)
    assert isinstance(ei.value, xla_client.HostCallbackError)
    assert isinstance(ei.value.exception, ZeroDivisionError)


def test_emit_python_callback_with_a_column_major_operand_layout(backend: xla_client.Client) -> None:
    # jaxlib's callback accepts any operand layout; the callable sees the same logical array.
    c = xla_client.XlaBuilder("layout")
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros((2, 3), F32)))
    seen: list[np.ndarray[Any, Any]] = []
    shape = xla_client.Shape.array_shape(np.dtype(F32), (2, 3))
    backend.emit_python_callback(
        lambda a: (seen.append(np.array(a)), (a + 1,))[1], c, [x], [shape], operand_layouts=[(0, 1)]
    )
    v = np.arange(6, dtype=F32).reshape(2, 3)
    out = run(backend, c, v)
    np.testing.assert_array_equal(seen[0], v)
    np.testing.assert_array_equal(out[0], v + 1)
    with pytest.raises(xs.ShapeError, match="permutation"):
        backend.emit_python_callback(lambda a: (a,), c, [x], [], operand_layouts=[(0, 0)])


def test_emit_python_callback_hands_strided_operands_in_their_layout(backend: xla_client.Client) -> None:
    # The former suite's PythonCallbackTest.testStriding: a column-major operand layout arrives as
    # a Fortran-ordered array (jaxlib passed XLA's memory as it was); a C-ordered result given for a
    # column-major result shape comes back with the right values. A rank-3 layout arrives with its
    # strides too, and the default layout stays C-ordered.
    c = xla_client.XlaBuilder("striding")
    arg = np.arange(12, dtype=np.int16).reshape(3, 4)
    f_layout = xla_client.Shape.array_shape(arg.dtype, arg.shape, layout=(0, 1))
    seen: list[tuple[bool, tuple[int, ...]]] = []

    def fn(x: np.ndarray[Any, Any]) -> tuple[Any, ...]:
        seen.append((x.flags.f_contiguous, x.strides))
        return (np.ascontiguousarray(x * 2),)

    p = ops.Parameter(c, 0, xla_client.shape_from_pyval(arg))
    backend.emit_python_callback(fn, c, [p], [f_layout], [f_layout])
    np.testing.assert_array_equal(run(backend, c, arg)[0], arg * 2)
    assert seen == [(True, (2, 6))]

    c = xla_client.XlaBuilder("rank3")
    v = np.arange(24, dtype=F32).reshape(2, 3, 4)
    got: list[np.ndarray[Any, Any]] = []
    p = ops.Parameter(c, 0, xla_client.shape_from_pyval(v))
    q = ops.Parameter(c, 1, xla_client.shape_from_pyval(v))
    shape = xla_client.shape_from_pyval(v)
    backend.emit_python_callback(
        lambda a, b: (got.extend([a, b]), (a - b,))[1], c, [p, q], [shape], operand_layouts=[(1, 2, 0), None]
    )
    out = run(backend, c, v, v[::-1].copy())
    np.testing.assert_array_equal(out[0], v - v[::-1])
    np.testing.assert_array_equal(got[0], v)
    assert got[0].strides == (4 * 3 * 4, 4, 4 * 3)  # dimension 1 fastest (3 long), then 2 (4 long), then 0
    assert got[1].flags.c_contiguous


def test_emit_python_callback_with_token_operands_and_results(backend: xla_client.Client) -> None:
    # The former callback: a token operand arrives as None; a token result's entry is ignored and
    # the op gives a new token there, ordering later side effects after the call.
    log: list[Any] = []
    c = xla_client.XlaBuilder("tokens")
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros(3, np.int32)))
    tok = ops.CreateToken(c)
    shapes = [xla_client.Shape.token_shape(), xla_client.Shape.array_shape(np.dtype(np.int32), (3,))]

    def first(t: Any, a: np.ndarray[Any, Any]) -> tuple[Any, ...]:
        log.append(("first", t, a.tolist()))
        return None, a * 10

    out, _ = backend.emit_python_callback(first, c, [tok, x], shapes, has_side_effects=True)
    assert c.get_shape(out).is_tuple()
    tok2 = ops.GetTupleElement(out, 0)
    y = ops.GetTupleElement(out, 1)
    backend.emit_python_callback(
        lambda t, a: (log.append(("second", t, a.tolist())), (None,))[1],
        c, [tok2, y], [xla_client.Shape.token_shape()], has_side_effects=True,
    )
    ops.Add(y, ops.Constant(c, np.int32(1)))
    result = run(backend, c, np.array([1, 2, 3], np.int32))
    np.testing.assert_array_equal(result[0], [11, 21, 31])
    assert log == [("first", None, [1, 2, 3]), ("second", None, [10, 20, 30])]


def test_debug_print_in_former_style(backend: xla_client.Client) -> None:
    out = io.StringIO()
    c = xla_client.XlaBuilder("print")
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros(2, np.int32)))
    ops.DebugPrint("x={} twice={}", x, ops.Add(x, x), file=out)
    run(backend, c, np.array([1, 2], np.int32))
    assert out.getvalue() == "x=[1 2] twice=[2 4]\n"


# -- run-time tokens --------------------------------------------------------------------------------

def test_execute_with_token(backend: xla_client.Client) -> None:
    log: list[str] = []
    c = xla_client.XlaBuilder("token")
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros(2, F32)))
    backend.emit_python_callback(lambda a: (log.append("ran"), ())[1], c, [x], [], has_side_effects=True)
    ops.Add(x, ops.Constant(c, F32(1)))
    exe = backend.compile(c.build())
    buf = backend.buffer_from_pyval(np.array([1, 2], F32))
    outs, token = exe.execute_with_token([buf])
    assert isinstance(token, xla_client.Token)
    token.block_until_ready()
    assert log == ["ran"]
    np.testing.assert_array_equal(np.asarray(outs[0]), [2, 3])


def test_sharded_tokens_and_sharded_buffers() -> None:
    backend = xla_client.make_cpu_client(num_devices=2)
    c = xla_client.XlaBuilder("replicated")
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros(2, F32)))
    ops.Mul(x, ops.Constant(c, F32(3)))
    options = xla_client.CompileOptions()
    options.num_replicas = 2
    exe = backend.compile(c.build(), options)
    devs = exe.local_devices()
    bufs = [backend.buffer_from_pyval(np.full(2, i + 1, F32), d) for i, d in enumerate(devs)]
    sharded = xla_client.ShardedBuffer.from_pybuffers(bufs)
    assert len(sharded) == 2 and sharded.shape == (2,) and sharded.dtype == F32
    outs, token = exe.execute_sharded_on_local_devices_with_tokens([sharded])
    assert isinstance(token, xla_client.ShardedToken)
    token.block_until_ready()
    token.get_token(1).block_until_ready()
    with pytest.raises(xs.ShapeError, match="out of range"):
        token.get_token(2)
    assert [np.asarray(o).tolist() for o in outs[0]] == [[3, 3], [6, 6]]
    results = exe.execute_sharded([bufs], with_tokens=True)
    results.consume_token().block_until_ready()
    assert [np.asarray(o).tolist() for o in results.disassemble_into_single_device_arrays()[0]] == [[3, 3], [6, 6]]
    with pytest.raises(xla_client.XlaRuntimeError, match="with_tokens=True"):
        exe.execute_sharded([bufs]).consume_token()
    sharded.delete()
    assert sharded.is_deleted()


def test_create_sharded_buffer_and_sharded_buffers_come_back_sharded() -> None:
    backend = xla_client.make_cpu_client(num_devices=2)
    c = xla_client.XlaBuilder("replicated_add")
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros(3, F32)))
    y = ops.Parameter(c, 1, xla_client.shape_from_pyval(np.zeros(3, F32)))
    ops.Tuple(c, [ops.Add(x, y), ops.Mul(x, y)])
    options = xla_client.CompileOptions()
    options.num_replicas = 2
    exe = backend.compile(c.build(), options)
    devs = exe.local_devices()
    xs_ = [np.array([1, 2, 3], F32), np.array([-1, 0, 4], F32)]
    ys_ = [np.array([10, 20, 30], F32), np.array([0.5, 2, -1], F32)]
    put = backend.buffer_from_pyval
    a = xla_client.ShardedBuffer.create_sharded_buffer([put(v, d) for v, d in zip(xs_, devs, strict=True)])
    b = xla_client.ShardedBuffer.create_sharded_buffer([put(v, d) for v, d in zip(ys_, devs, strict=True)])
    outs = exe.execute_sharded_on_local_devices([a, b])
    assert len(outs) == 2 and all(isinstance(o, xla_client.ShardedBuffer) for o in outs)
    for d in range(2):
        np.testing.assert_array_equal(np.asarray(outs[0][d]), xs_[d] + ys_[d])
        np.testing.assert_array_equal(np.asarray(outs[1][d]), xs_[d] * ys_[d])
    # the with-tokens form too (the former suite's testExecuteShardedOverloadShardedBufferInput)
    outs, token = exe.execute_sharded_on_local_devices_with_tokens([a, b])
    token.block_until_ready()
    assert len(outs) == 2 and all(isinstance(o, xla_client.ShardedBuffer) for o in outs)
    np.testing.assert_array_equal(np.asarray(outs[1].block_until_ready()[1]), xs_[1] * ys_[1])
    # lists of buffers in, lists of buffers out (as before)
    plain = exe.execute_sharded_on_local_devices([a.get_pybuffers(), b.get_pybuffers()])
    assert isinstance(plain[0], list) and isinstance(plain[0][0], xla_client.Buffer)
    with pytest.raises(xs.DTypeError, match="ShardedBuffer"):
        xla_client.ShardedBuffer.create_sharded_buffer([])


# -- tracebacks -------------------------------------------------------------------------------------

def test_tracebacks(backend: xla_client.Client) -> None:
    def a_function() -> Any:
        return xla_client.Traceback.get_traceback()

    with xla_client.tracebacks(enabled=False):
        assert xla_client.Traceback.get_traceback() is None
        assert backend.buffer_from_pyval(np.int32(7)).traceback is None
    with xla_client.tracebacks(enabled=True):
        tb = a_function()
        assert isinstance(tb, xla_client.Traceback)
        names = [f.function_name for f in tb.frames]  # bare co_name, as the former API (jaxlib: co_qualname)
        i = names.index("a_function")
        assert names[i + 1] == "test_tracebacks"
        assert "test_tracebacks" in str(tb)
        buf = backend.buffer_from_pyval(np.int32(7))
        assert any(f.function_name == "test_tracebacks" for f in buf.traceback.frames)
        c = xla_client.XlaBuilder("tb")
        ops.Add(ops.Constant(c, np.int32(1)), ops.Constant(c, np.int32(2)))
        e = backend.compile(c.build())
        assert any(f.function_name == "test_tracebacks" for f in e.traceback.frames)
        for frame, _ in traceback.walk_tb(tb.as_python_traceback()):
            _ = frame.f_locals  # must not crash


class _Holder:
    def method(self) -> Any:
        return xla_client.Traceback.get_traceback()


def test_traceback_frames_name_methods_by_their_bare_name() -> None:
    # The former API: Frame.function_name is co_name ('method'); jaxlib passes co_qualname
    # ('_Holder.method') through.
    with xla_client.tracebacks(enabled=True):
        tb = _Holder().method()
    names = [f.function_name for f in tb.frames]
    assert names[:2] == ["method", "test_traceback_frames_name_methods_by_their_bare_name"]
    assert f"({_Holder.method.__code__.co_name})" in str(tb).splitlines()[0]
    assert tb.frames[0].line_num == _Holder.method.__code__.co_firstlineno + 1
    assert tb.raw_frames()[0][0] is _Holder.method.__code__


def test_traceback_from_frames() -> None:
    def foo(x: int) -> int:
        return x + 1

    frame = xla_client.Frame(__file__, "foo", foo.__code__.co_firstlineno, foo.__code__.co_firstlineno + 1)
    tb = xla_client.Traceback.traceback_from_frames([frame])
    text = traceback.format_tb(tb)
    assert len(text) == 1 and text[0].split("\n")[0].endswith("foo") and "return x + 1" in text[0]


# -- shapes and small names -------------------------------------------------------------------------

def test_shape_element_type_is_a_dtype() -> None:
    s = xla_client.Shape.array_shape(np.dtype(F32), (2, 3))
    assert s.element_type() == np.float32 and isinstance(s.element_type(), np.dtype)
    assert xs.Shape.array_shape(np.float32, (2, 3)).element_type() is xs.PrimitiveType.F32
    assert s == xs.Shape.array_shape(np.float32, (2, 3)) and hash(s) == hash(xs.Shape.array_shape(F32, (2, 3)))
    t = xla_client.Shape.tuple_shape([s, xla_client.Shape.scalar_shape(np.dtype(np.int8))])
    assert [e.element_type() for e in t.tuple_shapes()] == [np.float32, np.int8]
    assert xla_client.shape_from_pyval(np.zeros(3, np.int16)).element_type() == np.int16
    c = xla_client.XlaBuilder("shapes")
    p = ops.Parameter(c, 0, s)  # a compat shape goes into the ops
    assert c.get_shape(p).element_type() == np.float32
    ps = c.get_program_shape()
    assert ps.parameter_shapes()[0].element_type() == np.float32
    comp = c.build()
    assert comp.program_shape().result_shape().element_type() == np.float32
    assert xla_client.Shape.token_shape().element_type() is xs.PrimitiveType.TOKEN


def test_shape_index_and_device_array_base(backend: xla_client.Client) -> None:
    a = xla_client.ShapeIndex([0, 1])
    assert a == xla_client.ShapeIndex([0, 1]) and a != xla_client.ShapeIndex([1])
    assert hash(a) == hash(xla_client.ShapeIndex([0, 1])) and list(a) == [0, 1] and repr(a) == "ShapeIndex({0, 1})"
    with pytest.raises(xs.ShapeError):
        xla_client.ShapeIndex([-1])
    buf = backend.buffer_from_pyval(np.ones(2, F32))
    assert isinstance(buf, xla_client.DeviceArrayBase)
    assert isinstance(xs.device_put(np.ones(2, F32)), xla_client.DeviceArrayBase)
    assert not isinstance(np.ones(2), xla_client.DeviceArrayBase)


def test_device_assignment_serialize() -> None:
    da = xla_client.DeviceAssignment.create(np.array([[0], [1]]))
    data = da.serialize()
    assert isinstance(data, bytes) and data == b"\x08\x02\x10\x01\x1a\x04\n\x02\x00\x01"  # jaxlib's bytes


def test_hlo_module_cost_analysis(backend: xla_client.Client) -> None:
    c = xla_client.XlaBuilder("cost")
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros((16, 16), F32)))
    ops.Dot(x, x)
    costs = xla_client._xla.hlo_module_cost_analysis(backend, c.build().get_hlo_module())
    assert costs["flops"] == 2 * 16 * 16 * 16


def test_random_algorithm_former_names(backend: xla_client.Client) -> None:
    R = xla_client.ops.RandomAlgorithm
    assert R.RNG_DEFAULT is R.DEFAULT and R.RNG_THREE_FRY is R.THREE_FRY and R.RNG_PHILOX is R.PHILOX
    c = xla_client.XlaBuilder("rng")
    state = ops.Constant(c, np.array([1, 2], np.uint64))
    shape = xla_client.Shape.array_shape(np.dtype(np.uint32), (4,))
    ops.RngBitGenerator(R.RNG_THREE_FRY, state, shape)
    out = run(backend, c)
    assert out[1].shape == (4,) and out[1].dtype == np.uint32


# -- the former keyword names -----------------------------------------------------------------------

def _adder(dtypes: list[Any]) -> xla_client.XlaComputation:
    b = xla_client.XlaBuilder("add")
    n = len(dtypes)
    p = [ops.Parameter(b, i, xla_client.shape_from_pyval(np.array(0, d))) for i, d in enumerate(dtypes + dtypes)]
    ops.Tuple(b, [ops.Add(p[i], p[i + n]) for i in range(n)])
    return b.build()


def test_reduce_window_keywords(backend: xla_client.Client) -> None:
    a = np.arange(12, dtype=F32).reshape(3, 4)
    c = xla_client.XlaBuilder("rw")
    b = xla_client.XlaBuilder("add1")
    s = xla_client.shape_from_pyval(F32(0))
    ops.Add(ops.Parameter(b, 0, s), ops.Parameter(b, 1, s))
    ops.ReduceWindowWithGeneralPadding(
        operand=ops.Constant(c, a), init_value=ops.Constant(c, F32(0)), computation=b.build(),
        window_dimensions=(2, 1), window_strides=(1, 1), base_dilations=(1, 1), window_dilations=(1, 1),
        padding=[(0, 0), (0, 0)],
    )
    np.testing.assert_array_equal(run(backend, c)[0], a[:-1] + a[1:])
    c = xla_client.XlaBuilder("rwv")
    ops.ReduceWindowWithGeneralPadding(
        operands=[ops.Constant(c, a), ops.Constant(c, a.astype(np.int32))],
        init_values=[ops.Constant(c, F32(0)), ops.Constant(c, np.int32(0))],
        computation=_adder([F32, np.int32]), window_dimensions=(1, 2), window_strides=(1, 2),
        base_dilations=(1, 1), window_dilations=(1, 1), padding=[(0, 0), (0, 0)],
    )
    f, i = run(backend, c)
    np.testing.assert_array_equal(f, a[:, ::2] + a[:, 1::2])
    np.testing.assert_array_equal(i, (a[:, ::2] + a[:, 1::2]).astype(np.int32))


def test_operand_keywords(backend: xla_client.Client) -> None:
    a = np.array([[1.0, -2.0], [3.0, -4.0]], F32)
    c = xla_client.XlaBuilder("kw")
    x = ops.Constant(c, a)
    ops.Tuple(c, [
        ops.Abs(operand=x),
        ops.Transpose(operand=x, permutation=[1, 0]),
        ops.Reshape(operand=x, new_sizes=[4]),
        ops.Clamp(min=ops.Constant(c, F32(-1)), operand=x, max=ops.Constant(c, F32(2))),
        ops.ConvertElementType(operand=x, new_element_type=xla_client.PrimitiveType.S32),
        ops.GetTupleElement(ops.TopK(input=ops.Reshape(x, [4]), k=2), 0),
        ops.Iota(c, type=np.int32, size=3),
        ops.Iota(c, shape=xla_client.Shape.array_shape(np.dtype(np.int32), (2, 2)), iota_dimension=1),
        ops.Zeta(x=ops.Constant(c, F32(2)), q=ops.Constant(c, F32(1))),
        ops.Fft(operand=ops.Constant(c, np.arange(4).astype(np.complex64)), fft_type=xla_client.FftType.FFT,
                fft_length=[4]),
        ops.ConstantLiteral(c, literal=np.int8(5)),
    ])
    out = run(backend, c)
    np.testing.assert_array_equal(out[0], np.abs(a))
    np.testing.assert_array_equal(out[1], a.T)
    np.testing.assert_array_equal(out[2], a.reshape(4))
    np.testing.assert_array_equal(out[3], np.clip(a, -1, 2))
    np.testing.assert_array_equal(out[4], a.astype(np.int32))
    np.testing.assert_array_equal(out[5], [3, 1])
    np.testing.assert_array_equal(out[6], [0, 1, 2])
    np.testing.assert_array_equal(out[7], [[0, 1], [0, 1]])
    np.testing.assert_allclose(out[8], np.pi**2 / 6, rtol=1e-6)
    np.testing.assert_allclose(out[9], np.fft.fft(np.arange(4)), atol=1e-5)
    assert out[10] == 5


def test_while_gather_scatter_keywords(backend: xla_client.Client) -> None:
    c = xla_client.XlaBuilder("w")
    s = xla_client.shape_from_pyval(np.int32(0))
    cb = xla_client.XlaBuilder("cond")
    ops.Lt(ops.Parameter(cb, 0, s), ops.Constant(cb, np.int32(5)))
    bb = xla_client.XlaBuilder("body")
    ops.Add(ops.Parameter(bb, 0, s), ops.Constant(bb, np.int32(1)))
    ops.While(condition=cb.build(), body=bb.build(), init=ops.Constant(c, np.int32(0)))
    assert run(backend, c)[0] == 5

    a = np.arange(6, dtype=F32).reshape(3, 2)
    c = xla_client.XlaBuilder("g")
    dn = xla_client.GatherDimensionNumbers()
    dn.offset_dims.append(1)
    dn.collapsed_slice_dims.append(0)
    dn.start_index_map.append(0)
    dn.index_vector_dim = 1
    ops.Gather(a=ops.Constant(c, a), start_indices=ops.Constant(c, np.array([[2], [0]], np.int32)),
               dimension_numbers=dn, slice_sizes=[1, 2])
    np.testing.assert_array_equal(run(backend, c)[0], a[[2, 0]])

    c = xla_client.XlaBuilder("s")
    sn = xla_client.ScatterDimensionNumbers()
    sn.update_window_dims.append(1)
    sn.inserted_window_dims.append(0)
    sn.scatter_dims_to_operand_dims.append(0)
    sn.index_vector_dim = 1
    add = xla_client.XlaBuilder("add")
    sf = xla_client.shape_from_pyval(F32(0))
    ops.Add(ops.Parameter(add, 0, sf), ops.Parameter(add, 1, sf))
    ops.Scatter(input=ops.Constant(c, a), scatter_indices=ops.Constant(c, np.array([[1]], np.int32)),
                updates=ops.Constant(c, np.ones((1, 2), F32)), update_computation=add.build(),
                dimension_numbers=sn)
    expected = a.copy()
    expected[1] += 1
    np.testing.assert_array_equal(run(backend, c)[0], expected)


def test_dynamic_slice_legacy_index_vector(backend: xla_client.Client) -> None:
    a = np.arange(12, dtype=F32).reshape(3, 4)
    c = xla_client.XlaBuilder("ds")
    x = ops.Constant(c, a)
    ops.DynamicSlice(x, [ops.Constant(c, np.array([1, 2], np.int32))], [2, 2])
    np.testing.assert_array_equal(run(backend, c)[0], a[1:3, 2:4])
    c = xla_client.XlaBuilder("dus")
    x = ops.Constant(c, a)
    ops.DynamicUpdateSlice(operand=x, update=ops.Constant(c, np.zeros((1, 2), F32)),
                           start_indices=[ops.Constant(c, np.array([2, 1], np.int32))])
    expected = a.copy()
    expected[2, 1:3] = 0
    np.testing.assert_array_equal(run(backend, c)[0], expected)


@pytest.mark.parametrize("flags", [[False, True], [True, False], [True, True]])
def test_conv_window_reversal(backend: xla_client.Client, flags: list[bool]) -> None:
    lhs = np.arange(20, dtype=F32).reshape(1, 1, 4, 5)
    rhs = np.arange(6, dtype=F32).reshape(1, 1, 2, 3)
    c = xla_client.XlaBuilder("conv")
    ops.ConvGeneralDilated(
        ops.Constant(c, lhs), ops.Constant(c, rhs), [1, 1], [(0, 0), (0, 0)], [1, 1], [1, 1], None,
        window_reversal=flags,
    )
    k = rhs[0, 0][:: -1 if flags[0] else 1, :: -1 if flags[1] else 1]
    ref = np.array([[(lhs[0, 0, i:i + 2, j:j + 3] * k).sum() for j in range(3)] for i in range(3)])
    np.testing.assert_array_equal(run(backend, c)[0][0, 0], ref)


def test_traceback_from_frames_lines_and_order_after_other_tracebacks() -> None:
    # jaxlib's traceback_from_frames sometimes pointed at the def line (found under pytest -n 2).
    with xla_client.tracebacks(enabled=True):
        for _ in range(3):
            xla_client.Traceback.get_traceback()
    frames = [xla_client.Frame(__file__, "inner", 1, 3), xla_client.Frame(__file__, "outer", 1, 5)]
    text = traceback.format_tb(xla_client.Traceback.traceback_from_frames(frames))
    assert [t.splitlines()[0].strip() for t in text] == [
        f'File "{__file__}", line 5, in outer',
        f'File "{__file__}", line 3, in inner',
    ]
