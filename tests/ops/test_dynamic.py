"""Tests of the dynamic-shape ops of xlasdk/ops/shaping.py (``GetDimensionSize``,
``SetDimensionSize``, ``DynamicReshape``, ``RemoveDynamicDimension``) and of how xs.compile runs
bounded dynamic shapes on jaxlib 0.10.2 CPU: results at their real extents, dynamic parameters
taken as padded arrays plus sizes (XLA's CPU runtime has no PadToStatic).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import param
from xlasdk import ops, xla_client
from xlasdk.errors import DTypeError, ShapeError

S = xs.Shape
F32 = np.float32


def _sum(b: xs.XlaBuilder, x: xs.XlaOp, dims: list[int]) -> xs.XlaOp:
    return ops.Reduce(b, [x], [ops.Constant(b, F32(0))], lambda a, c: a + c, dims)


def test_set_and_get_dimension_size_values() -> None:
    b = xs.XlaBuilder("sizes")
    x = param(b, 0, F32, (5,))
    n = param(b, 1, np.int32, ())
    d = ops.SetDimensionSize(x, n, 0)
    assert d.shape == S.array_shape(F32, (5,), dynamic_dimensions=[True]) and str(d.shape) == "f32[<=5]"
    assert d.shape.mlir_type() == "tensor<?xf32, #stablehlo.bounds<5>>"
    g = ops.GetDimensionSize(d, 0)
    assert g.shape == S.scalar_shape(np.int32)
    comp = b.build(ops.Tuple(b, [g, _sum(b, d * 2.0, [0]), ops.GetDimensionSize(x, 0)]))
    assert "f32[<=5]" in comp.as_hlo_text()
    exe = xs.compile(comp)
    v = np.arange(5, dtype=F32)
    for k in range(6):
        size, total, static = (o.to_numpy() for o in exe(v, np.int32(k)))  # type: ignore[union-attr]
        assert size == k and static == 5
        assert total == pytest.approx(2 * v[:k].sum())


@pytest.mark.parametrize("k", [0, 1, 3, 4])
def test_dynamic_results_come_back_at_real_extents(k: int) -> None:
    b = xs.XlaBuilder("extents")
    x = param(b, 0, F32, (4, 3))
    n = param(b, 1, np.int32, ())
    d = ops.SetDimensionSize(ops.SetDimensionSize(x, n, 0), 2, 1)
    assert str(d.shape) == "f32[<=4,<=3]"
    exe = xs.compile(b.build(ops.Tuple(b, [d + 1.0, x, ops.GetDimensionSize(d, 0)])))
    assert [str(s) for s in exe.output_shapes] == ["f32[<=4,<=3]", "f32[4,3]", "s32[]"]
    v = np.arange(12, dtype=F32).reshape(4, 3)
    cut, whole, size = exe(v, np.int32(k))  # type: ignore[misc]
    assert cut.shape == (k, 2)
    np.testing.assert_array_equal(cut.to_numpy(), v[:k, :2] + 1)
    np.testing.assert_array_equal(whole.to_numpy(), v)
    assert size.to_numpy() == k
    with pytest.raises(xs.XlaRuntimeError, match="cannot be serialized"):
        exe.serialize()


def test_single_dynamic_result_and_replicas() -> None:
    cl = xs.client("cpu", num_devices=2)
    b = xs.XlaBuilder("rep")
    x = param(b, 0, F32, (5,))
    n = param(b, 1, np.int32, ())
    exe = xs.compile(b.build(ops.SetDimensionSize(x, n, 0)), cl.devices()[0], options=xs.CompileOptions(num_replicas=2))
    v = np.arange(5, dtype=F32)
    outs = exe.execute_replicated([[v, np.int32(2)], [v, np.int32(4)]])
    assert [o.to_numpy().tolist() for o in outs] == [[0, 1], [0, 1, 2, 3]]  # type: ignore[union-attr]
    exe1 = xs.compile(b.build(ops.SetDimensionSize(x, n, 0)))
    np.testing.assert_array_equal(exe1(v, np.int32(3)).to_numpy(), v[:3])  # type: ignore[union-attr]


def test_dynamic_reshape() -> None:
    b = xs.XlaBuilder("dr")
    x = param(b, 0, F32, (6,))
    rows = param(b, 1, np.int32, ())
    r = ops.DynamicReshape(x, [rows, 3], [2, 3], [True, False])
    assert str(r.shape) == "f32[<=2,3]"
    exe = xs.compile(b.build(ops.Tuple(b, [r, _sum(b, r, [0, 1])])))
    v = np.arange(6, dtype=F32)
    for k in (0, 1, 2):
        out, total = exe(v, np.int32(k))  # type: ignore[misc]
        np.testing.assert_array_equal(out.to_numpy(), v.reshape(2, 3)[:k])
        assert total.to_numpy() == v.reshape(2, 3)[:k].sum()


def test_remove_dynamic_dimension() -> None:
    b = xs.XlaBuilder("rm")
    x = param(b, 0, F32, (5,))
    r = ops.RemoveDynamicDimension(ops.SetDimensionSize(x, 2, 0), 0)
    assert r.shape == S.array_shape(F32, (5,)) and r.shape.is_static()
    assert ops.RemoveDynamicDimension(x, 0) is x
    out = xs.compile(b.build(_sum(b, r, [0])))(np.ones(5, F32))
    assert out.to_numpy() == 5  # type: ignore[union-attr]


def test_errors() -> None:
    b = xs.XlaBuilder("e")
    x = param(b, 0, F32, (5, 2))
    with pytest.raises(ShapeError, match="dimension 2 out of range"):
        ops.GetDimensionSize(x, 2)
    with pytest.raises(ShapeError, match=r"val 6 out of range \[0, 5\]"):
        ops.SetDimensionSize(x, 6, 0)
    with pytest.raises(DTypeError, match="must be an s32"):
        ops.SetDimensionSize(x, ops.Constant(b, np.int64(1)), 0)
    with pytest.raises(ShapeError, match="element count|elements"):
        ops.DynamicReshape(x, [2, 2], [2, 2], [True, False])
    with pytest.raises(ShapeError, match="one entry per output dimension"):
        ops.DynamicReshape(x, [2], [10], [True, False])
    with pytest.raises(ShapeError, match="must be static"):
        ops.DynamicReshape(ops.SetDimensionSize(x, 1, 0), [1, 10], [1, 10], [True, False])
    with pytest.raises(ShapeError, match=r"dim_sizes\[0\] = 3 out of range"):
        ops.DynamicReshape(x, [3, 5], [2, 5], [True, False])


@pytest.mark.parametrize("shape", [(5, 3), (2, 3), (3, 1), (0, 2), (4, 0)])
def test_dynamic_parameters(shape: tuple[int, int]) -> None:
    b = xs.XlaBuilder("dynparam")
    x = ops.Parameter(b, 0, S.array_shape(F32, (5, 3), dynamic_dimensions=[True, True]), "x")
    y = param(b, 1, F32, (2,))
    total = _sum(b, x, [0, 1])
    exe = xs.compile(
        b.build(ops.Tuple(b, [x * 2.0, total, ops.GetDimensionSize(x, 0), ops.GetDimensionSize(x, 1), y]))
    )
    assert [str(s) for s in exe.input_shapes] == ["f32[<=5,<=3]", "f32[2]"]
    a = np.arange(int(np.prod(shape)), dtype=F32).reshape(shape) + 1
    doubled, s, n0, n1, same = exe(a, np.ones(2, F32))  # type: ignore[misc]
    np.testing.assert_array_equal(doubled.to_numpy(), a * 2)
    assert s.to_numpy() == a.sum() and (n0.to_numpy(), n1.to_numpy()) == shape
    np.testing.assert_array_equal(same.to_numpy(), [1, 1])


def test_dynamic_parameter_errors() -> None:
    b = xs.XlaBuilder("dp")
    x = ops.Parameter(b, 0, S.array_shape(F32, (4, 2), dynamic_dimensions=[True, False]), "x")
    exe = xs.compile(b.build(_sum(b, x, [0, 1])))
    assert exe(np.ones((3, 2), F32)).to_numpy() == 6  # type: ignore[union-attr]
    with pytest.raises(ShapeError, match=r"argument 0 \('x'\) has shape \(5, 2\), expected f32\[<=4,2\]"):
        exe(np.ones((5, 2), F32))
    with pytest.raises(ShapeError, match="expected f32"):
        exe(np.ones((3, 1), F32))  # a static dimension must match
    with pytest.raises(DTypeError, match="dtype float64"):
        exe(np.ones((3, 2)))
    cl = xs.client("cpu", num_devices=2)
    rep = xs.compile(b.build(_sum(b, x, [0, 1])), cl.devices()[0], options=xs.CompileOptions(num_replicas=2))
    outs = rep.execute_replicated([[np.ones((1, 2), F32)], [np.ones((4, 2), F32)]])
    assert [float(o.to_numpy()) for o in outs] == [2.0, 8.0]  # type: ignore[union-attr]


def test_loaded_program_with_dynamic_result_is_refused(tmp_path: Any) -> None:
    b = xs.XlaBuilder("saved")
    x = param(b, 0, F32, (5,))
    comp = b.build(ops.SetDimensionSize(x, 3, 0))
    path = os.path.join(str(tmp_path), "dyn.mlir")
    comp.save(path)
    with pytest.raises(xs.CompileError, match="padded"):
        xs.compile(xs.load_computation(path))


def test_former_style_dynamic_ops() -> None:
    backend = xla_client.make_cpu_client()
    c = xla_client.XlaBuilder("former")
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros(6, F32)))
    n = ops.Constant(c, np.int32(4))
    d = xla_client.ops.SetDimensionSize(operand=x, val=n, dimension=0)
    r = xla_client.ops.DynamicReshape(
        operand=x, dim_sizes=[ops.Constant(c, np.int32(1)), 3], new_size_bounds=[2, 3], dims_are_dynamic=[True, False]
    )
    ops.Tuple(c, [xla_client.ops.GetDimensionSize(operand=d, dimension=0), d, r])
    assert c.get_shape(d).is_dynamic_dimension(0)
    exe = backend.compile(c.build())
    size, cut, rows = xla_client.execute_with_python_values(exe, [np.arange(6, dtype=F32)], backend)
    assert size == 4
    np.testing.assert_array_equal(cut, np.arange(4, dtype=F32))
    np.testing.assert_array_equal(rows, [[0, 1, 2]])
