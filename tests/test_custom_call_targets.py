"""The user's own custom-call targets: ``xs.register_custom_call_target`` and the former
``xla_client.register_custom_call_target``, with an XLA FFI handler and a legacy CPU function that
this test compiles with the machine's g++ against jaxlib's own headers (tests/data/ffi/)."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import jaxlib
import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops, xla_client

CustomCallApiVersion = ops.CustomCallApiVersion

SOURCE = Path(__file__).resolve().parent / "data" / "ffi" / "scale_add.cc"
INCLUDE = Path(jaxlib.__file__).resolve().parent / "include"


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    gxx = shutil.which("g++")
    if gxx is None or not (INCLUDE / "xla" / "ffi" / "api" / "ffi.h").is_file():
        pytest.skip("needs g++ and jaxlib's XLA FFI headers (jaxlib/include/xla/ffi/api)")
    out = tmp_path_factory.mktemp("ffi") / f"scale_add_{os.getpid()}.so"
    subprocess.run([gxx, "-std=c++17", "-O1", "-shared", "-fPIC", "-w", f"-I{INCLUDE}", str(SOURCE), "-o", str(out)],
                   check=True, capture_output=True, timeout=300)
    return ctypes.CDLL(str(out))


def test_an_ffi_handler_runs_from_ops_custom_call(lib: ctypes.CDLL) -> None:
    xs.register_custom_call_target("xlasdk_test_scale_add", lib.ScaleAdd)  # api_version=1: XLA FFI
    b = xs.XlaBuilder("ffi")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2, 3)), "x")
    ops.CustomCall(
        b, "xlasdk_test_scale_add", [x], xs.Shape.array_shape(np.float32, (2, 3)),
        api_version=CustomCallApiVersion.API_VERSION_TYPED_FFI, backend_config={"factor": np.float32(2.5)},
    )
    v = np.array([[0.0, 1.0, -2.0], [4.0, 0.5, 8.0]], np.float32)
    got = xs.compile(b.build())(v).to_numpy()
    np.testing.assert_array_equal(got, v * np.float32(2.5) + 1)
    assert xs.runtime.registered_custom_call_targets()[("CPU", "xlasdk_test_scale_add")] == 1


def test_a_capsule_handler_in_the_former_api(lib: ctypes.CDLL) -> None:
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    capsule = new_capsule(ctypes.cast(lib.LegacySub4, ctypes.c_void_p).value, None, None)
    xla_client.register_custom_call_target(b"xlasdk_test_legacy_sub4", capsule, platform="cpu")  # api_version=0
    c = xla_client.XlaBuilder("legacy")
    s4 = xla_client.Shape.array_shape(np.dtype(np.int32), (4,))
    a = ops.Parameter(c, 0, s4)
    d = ops.Parameter(c, 1, s4)
    ops.CustomCall(c, b"xlasdk_test_legacy_sub4", [a, d], s4)
    backend = xla_client.make_cpu_client()
    x, y = np.array([10, 20, 30, 40], np.int32), np.array([1, -2, 3, 50], np.int32)
    out = xla_client.execute_with_python_values(backend.compile(c.build()), [x, y], backend)
    np.testing.assert_array_equal(out[0], x - y)


def test_bad_registrations_are_xlasdk_errors(lib: ctypes.CDLL) -> None:
    with pytest.raises(xs.DTypeError, match="name must be a non-empty str"):
        xs.register_custom_call_target("", lib.ScaleAdd)
    with pytest.raises(xs.DTypeError, match="expected a PyCapsule .* got function"):
        xs.register_custom_call_target("xlasdk_test_bad", lambda: None)
    with pytest.raises(xs.DTypeError, match="api_version must be 0 .* or 1"):
        xs.register_custom_call_target("xlasdk_test_bad", lib.ScaleAdd, api_version=4)
    with pytest.raises(xs.DTypeError, match="'execute'"):
        xs.register_custom_call_target("xlasdk_test_bad", {"prepare": lib.ScaleAdd})


def test_an_unregistered_target_is_a_compile_error_naming_it() -> None:
    b = xs.XlaBuilder("unknown")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)), "x")
    ops.CustomCall(b, "xlasdk_test_never_registered", [x], xs.Shape.array_shape(np.float32, (2,)),
                   api_version=CustomCallApiVersion.API_VERSION_TYPED_FFI)
    with pytest.raises(xs.CompileError, match="xlasdk_test_never_registered"):
        xs.compile(b.build())
