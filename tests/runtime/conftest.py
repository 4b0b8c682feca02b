"""Fixtures for the runtime tests: hand-written StableHLO computations.

The runtime tests make computations of hand-written StableHLO text with a given program shape
instead of using the builder (which other modules test); ``test_executable.py`` also runs one
builder-made computation end to end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from xlasdk.program.computation import XlaComputation
from xlasdk.program.origin import Loaded
from xlasdk.shape import ProgramShape, Shape
from xlasdk.types import PrimitiveType


def MlirComputation(  # noqa: N802 (it stands where a class stood)
    name: str, text: str, params: Sequence[Shape], result: Shape, names: Sequence[str] = ()
) -> XlaComputation:
    """A computation of hand-written StableHLO ``text`` with the given program shape, compiled in
    this process as a built one would be (the runtime tests need no builder)."""
    return XlaComputation(name, ProgramShape(params, result, names), Loaded(None, text))


def shape(dtype: Any, *dims: int) -> Shape:
    return Shape.array_shape(dtype, dims)


def _elementwise(name: str, op: str, mlir_type: str, dtype: Any, dims: tuple[int, ...]) -> XlaComputation:
    text = (
        f"module @{name} {{ func.func public @main(%a: {mlir_type}, %b: {mlir_type}) -> {mlir_type} {{\n"
        f"  %0 = stablehlo.{op} %a, %b : {mlir_type}\n"
        f"  return %0 : {mlir_type}\n}} }}"
    )
    s = shape(dtype, *dims)
    return MlirComputation(name, text, [s, s], s, ["a", "b"])


@pytest.fixture(scope="session")
def add23() -> XlaComputation:
    """add(a: f32[2,3], b: f32[2,3]) -> f32[2,3]."""
    return _elementwise("add", "add", "tensor<2x3xf32>", np.float32, (2, 3))


@pytest.fixture(scope="session")
def mul_add3() -> XlaComputation:
    """C-14: f(a, b) = a * b + a on f32[3]."""
    t = "tensor<3xf32>"
    text = (
        f"module @f {{ func.func public @main(%a: {t}, %b: {t}) -> {t} {{\n"
        f"  %0 = stablehlo.multiply %a, %b : {t}\n  %1 = stablehlo.add %0, %a : {t}\n"
        f"  return %1 : {t}\n}} }}"
    )
    s = shape(np.float32, 3)
    return MlirComputation("f", text, [s, s], s, ["a", "b"])


@pytest.fixture(scope="session")
def scalar_affine() -> Any:
    """affine(x: T[], y: T[]) -> T[] = x * y + x, for a dtype given by name (f32, s8, pred...)."""

    def make(et: PrimitiveType) -> XlaComputation:
        from xlasdk.types import mlir_element_type

        t = f"tensor<{mlir_element_type(et)}>"
        op = "and" if et == PrimitiveType.PRED else "multiply"
        text = (
            f"module @affine {{ func.func public @main(%x: {t}, %y: {t}) -> {t} {{\n"
            f"  %0 = stablehlo.{op} %x, %y : {t}\n  return %0 : {t}\n}} }}"
        )
        s = Shape.scalar_shape(et)
        return MlirComputation("affine", text, [s, s], s, ["x", "y"])

    return make


@pytest.fixture(scope="session")
def add_and_sub() -> XlaComputation:
    """(a: f32[4], b: f32[4]) -> (a + b, a - b): a tuple result."""
    t = "tensor<4xf32>"
    text = (
        f"module @addsub {{ func.func public @main(%a: {t}, %b: {t}) -> ({t}, {t}) {{\n"
        f"  %0 = stablehlo.add %a, %b : {t}\n  %1 = stablehlo.subtract %a, %b : {t}\n"
        f"  return %0, %1 : {t}, {t}\n}} }}"
    )
    s = shape(np.float32, 4)
    return MlirComputation("addsub", text, [s, s], Shape.tuple_shape([s, s]), ["a", "b"])


@pytest.fixture(scope="session")
def matmul() -> XlaComputation:
    """dot(x: f32[4,8], y: f32[8,16]) -> f32[4,16]: 2*4*8*16 = 1024 flops."""
    text = (
        "module @matmul { func.func public @main(%x: tensor<4x8xf32>, %y: tensor<8x16xf32>)"
        " -> tensor<4x16xf32> {\n"
        "  %0 = stablehlo.dot_general %x, %y, contracting_dims = [1] x [0] : "
        "(tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>\n"
        "  return %0 : tensor<4x16xf32>\n} }"
    )
    params = [shape(np.float32, 4, 8), shape(np.float32, 8, 16)]
    return MlirComputation("matmul", text, params, shape(np.float32, 4, 16), ["x", "y"])


@pytest.fixture(scope="session")
def allreduce_replica_id() -> XlaComputation:
    """(x: f32[2]) -> (all_reduce_sum(x) over replicas {0,1,2,3}, replica_id as u32[])."""
    text = """module @ar { func.func public @main(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<ui32>) {
  %0 = "stablehlo.all_reduce"(%x) ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<2xf32>) -> tensor<2xf32>
  %1 = stablehlo.replica_id : tensor<ui32>
  return %0, %1 : tensor<2xf32>, tensor<ui32>
} }"""
    result = Shape.tuple_shape([shape(np.float32, 2), Shape.scalar_shape(np.uint32)])
    return MlirComputation("ar", text, [shape(np.float32, 2)], result, ["x"])


@pytest.fixture(scope="session")
def replica_id_only() -> XlaComputation:
    """(x: f32[2]) -> (replica_id: u32[], x + 0)."""
    text = """module @rid { func.func public @main(%x: tensor<2xf32>) -> (tensor<ui32>, tensor<2xf32>) {
  %0 = stablehlo.replica_id : tensor<ui32>
  return %0, %x : tensor<ui32>, tensor<2xf32>
} }"""
    result = Shape.tuple_shape([Shape.scalar_shape(np.uint32), shape(np.float32, 2)])
    return MlirComputation("rid", text, [shape(np.float32, 2)], result, ["x"])


@pytest.fixture(scope="session")
def cpu4() -> Any:
    """A 4-device CPU client (shared by the tests that need several devices)."""
    import xlasdk.runtime as rt

    return rt.client("cpu", num_devices=4)


@pytest.fixture(scope="session")
def make_computation() -> Any:
    """The stand-in class, for tests that write their own module text."""
    return MlirComputation
