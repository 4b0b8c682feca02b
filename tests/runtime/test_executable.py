"""compile / Executable: running, argument checks, introspection, serialization, replicas."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk.runtime as rt
from xlasdk.errors import CompileError, DTypeError, FormatError, ShapeError, XlaRuntimeError, XlaSdkError
from xlasdk.runtime._arguments import _CallPlan, _ParamSpec
from xlasdk.shape import Shape
from xlasdk.types import PrimitiveType

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.full((2, 3), 0.5, np.float32)


@pytest.fixture(scope="module")
def add_exe(add23: Any) -> rt.Executable:
    return rt.compile(add23)


# -- running --------------------------------------------------------------------------------------
def test_add_with_numpy_arguments(add_exe: rt.Executable) -> None:
    out = add_exe(A, B)
    assert isinstance(out, rt.DeviceArray)
    assert out.shape == (2, 3) and out.dtype == np.float32
    assert out.device is add_exe.devices[0]
    np.testing.assert_array_equal(out.to_numpy(), A + B)


def test_add_with_device_arrays_and_mixed(add_exe: rt.Executable) -> None:
    da, db = rt.device_put(A), rt.device_put(B)
    np.testing.assert_array_equal(add_exe(da, db).to_numpy(), A + B)
    np.testing.assert_array_equal(add_exe(da, B).to_numpy(), A + B)
    # outputs feed straight back in
    out = add_exe(add_exe(da, db), db)
    np.testing.assert_array_equal(np.asarray(out), A + 2 * B)


def test_add_with_non_contiguous_big_endian_and_dlpack_args(add_exe: rt.Executable) -> None:
    wide = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(add_exe(wide[:, ::2], B).to_numpy(), wide[:, ::2] + B)
    np.testing.assert_array_equal(add_exe(A.astype(">f4"), B).to_numpy(), A + B)

    class Producer:
        def __dlpack__(self, **kw: Any) -> Any:
            return A.__dlpack__(**kw)

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    np.testing.assert_array_equal(add_exe(Producer(), B).to_numpy(), A + B)


def test_device_array_from_another_client_is_moved(add_exe: rt.Executable, cpu4: rt.Client) -> None:
    other = rt.device_put(A, cpu4.devices()[3])
    out = add_exe(other, B)
    assert out.device is add_exe.devices[0]
    np.testing.assert_array_equal(out.to_numpy(), A + B)


def test_compile_for_a_named_device_of_a_multi_device_client(add23: Any, cpu4: rt.Client) -> None:
    exe = rt.compile(add23, cpu4.devices()[2])
    assert exe.devices == (cpu4.devices()[2],)
    out = exe(A, B)
    assert out.device is cpu4.devices()[2]
    np.testing.assert_array_equal(out.to_numpy(), A + B)
    assert rt.compile(add23, "cpu:0").devices == (rt.devices()[0],)


def test_tuple_result(add_and_sub: Any) -> None:
    exe = rt.compile(add_and_sub)
    a, b = np.array([1, 2, 3, 4], np.float32), np.array([4, 3, 2, 1], np.float32)
    out = exe(a, b)
    assert isinstance(out, tuple) and len(out) == 2
    np.testing.assert_array_equal(out[0].to_numpy(), a + b)
    np.testing.assert_array_equal(out[1].to_numpy(), a - b)
    assert exe.output_shapes == (Shape.array_shape(np.float32, (4,)),) * 2


@pytest.mark.parametrize(
    ("etype", "x", "y", "expected"),
    [
        (PrimitiveType.F32, 2.0, 3, np.float32(6)),
        (PrimitiveType.F32, 0.1, 1, np.float32(0.1)),  # floats round to nearest
        (PrimitiveType.F64, 0.1, 3.0, np.float64(0.1) * 3.0),
        (PrimitiveType.S8, -128, 1, np.int8(-128)),
        (PrimitiveType.S32, 3.0, 4, np.int32(12)),  # an integral float is exact
        (PrimitiveType.U8, 255, True, np.uint8(255)),
        (PrimitiveType.PRED, True, 1, np.bool_(True)),
        (PrimitiveType.BF16, 1.5, 2, ml_dtypes.bfloat16(3.0)),
        (PrimitiveType.C64, 1 + 2j, 2, np.complex64(2 + 4j)),
        (PrimitiveType.S4, -8, 1, ml_dtypes.int4(-8)),
    ],
)
def test_python_scalars_for_rank0_parameters(
    scalar_affine: Any, etype: PrimitiveType, x: Any, y: Any, expected: Any
) -> None:
    exe = rt.compile(scalar_affine(etype))
    out = exe(x, y).to_numpy()
    assert out.shape == () and out.dtype == np.dtype(type(expected))
    assert out == expected


@pytest.mark.parametrize(
    ("etype", "value"),
    [
        (PrimitiveType.S8, 300),
        (PrimitiveType.U8, -1),
        (PrimitiveType.S32, 2.5),
        (PrimitiveType.S32, 2**31),
        (PrimitiveType.F32, 1e300),  # overflows to inf
        (PrimitiveType.F32, 2**30 + 1),  # an int f32 cannot hold exactly
        (PrimitiveType.F32, 1j),
        (PrimitiveType.PRED, 2),
        (PrimitiveType.PRED, 0.5),
        (PrimitiveType.S4, 8),
        (PrimitiveType.F8E4M3FN, 1000.0),
    ],
)
def test_lossy_python_scalars_raise(scalar_affine: Any, etype: PrimitiveType, value: Any) -> None:
    exe = rt.compile(scalar_affine(etype))
    with pytest.raises(DTypeError, match=r"affine: argument 0 \('x'\) is the Python .* which does not fit"):
        exe(value, 1)


def test_numpy_scalars_keep_their_dtype(scalar_affine: Any) -> None:
    exe = rt.compile(scalar_affine(PrimitiveType.F32))
    assert exe(np.float32(2), np.float32(4)).item() == 8.0
    with pytest.raises(DTypeError, match=r"argument 1 \('y'\) is f64\[\], expected f32\[\]"):
        exe(np.float32(2), np.float64(4))


# -- argument checks ------------------------------------------------------------------------------
def test_wrong_argument_count(add_exe: rt.Executable) -> None:
    expected = r"add: expected 2 arguments \(a: f32\[2,3\], b: f32\[2,3\]\), got 1"
    with pytest.raises(ShapeError, match=expected):
        add_exe(A)
    with pytest.raises(ShapeError, match="got 3"):
        add_exe(A, B, B)


def test_wrong_shape_of_equal_byte_size_is_caught(add_exe: rt.Executable) -> None:
    # XLA itself would silently accept f32[3,2] or f32[6] for f32[2,3].
    with pytest.raises(ShapeError, match=r"add: argument 1 \('b'\) is f32\[3,2\], expected f32\[2,3\]"):
        add_exe(A, B.reshape(3, 2))
    with pytest.raises(ShapeError, match=r"argument 0 \('a'\) is f32\[6\], expected f32\[2,3\]"):
        add_exe(A.reshape(6), B)
    with pytest.raises(ShapeError, match=r"argument 1 \('b'\) is a DeviceArray f32\[3,2\]"):
        add_exe(A, rt.device_put(B.reshape(3, 2)))
    with pytest.raises(ShapeError, match=r"is the Python float 1.0, expected f32\[2,3\]"):
        add_exe(A, 1.0)


def test_wrong_dtype(add_exe: rt.Executable) -> None:
    with pytest.raises(DTypeError, match=r"argument 0 \('a'\) is f64\[2,3\], expected f32\[2,3\]"):
        add_exe(A.astype(np.float64), B)
    with pytest.raises(DTypeError, match=r"argument 1 \('b'\) is a DeviceArray bf16\[2,3\]"):
        add_exe(A, rt.device_put(B.astype(ml_dtypes.bfloat16)))
    with pytest.raises(DTypeError, match=r"argument 0 \('a'\) is a list"):
        add_exe(A.tolist(), B)
    with pytest.raises(DTypeError, match=r"argument 0 \('a'\) is a str"):
        add_exe("A", B)
    with pytest.raises(DTypeError, match="dtype object"):
        add_exe(np.empty((2, 3), object), B)
    # both are also the builtin exception types
    with pytest.raises(TypeError):
        add_exe(A.astype(np.int32), B)
    with pytest.raises(ValueError):
        add_exe(A.T, B)


def test_deleted_device_array_argument(add_exe: rt.Executable) -> None:
    d = rt.device_put(A)
    d.delete()
    with pytest.raises(XlaRuntimeError, match=r"argument 0 \('a'\) is a deleted DeviceArray f32\[2,3\]"):
        add_exe(d, B)


def test_repeat_calls_reuse_the_precomputed_plan(add_exe: rt.Executable, monkeypatch: Any) -> None:
    plan = add_exe._plan
    add_exe(A, B)
    made = _CallPlan.created

    def no_new_specs(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a call built new validation data")

    monkeypatch.setattr(_ParamSpec, "__init__", no_new_specs)
    monkeypatch.setattr(_CallPlan, "__init__", no_new_specs)
    da = rt.device_put(A)
    for _ in range(20):
        add_exe(A, B)
        add_exe(da, da)
    assert add_exe._plan is plan
    assert _CallPlan.created == made


def test_hot_path_makes_no_failing_jax_imports(add_exe: rt.Executable) -> None:
    # Without the jax package, jaxlib looks for jax.core / jax._src.sharding_impls while
    # reading arrays back; each miss costs ~70 us. The runtime must never let it miss.
    import importlib.abc

    from xlasdk._jaxlib import pjrt

    if pjrt._SHIM is None:
        pytest.skip("jax is installed: jaxlib imports the real one")
    misses: list[str] = []

    class Recorder(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any, target: Any = None) -> None:
            if name == "jax" or name.startswith("jax."):
                misses.append(name)
            return None

    finder = Recorder()
    sys.meta_path.insert(0, finder)
    try:
        da = rt.device_put(A)
        for _ in range(3):
            out = add_exe(A, B)
            out.to_numpy()
            add_exe(da, out).block_until_ready().to_numpy()
            rt.device_put(B).to_numpy()
    finally:
        sys.meta_path.remove(finder)
    assert misses == []
    assert "jax" not in sys.modules


def test_multi_device_executable_needs_execute_replicated(allreduce_replica_id: Any, cpu4: rt.Client) -> None:
    exe = rt.compile(allreduce_replica_id, cpu4.devices()[0], options=rt.CompileOptions(num_replicas=4))
    with pytest.raises(XlaRuntimeError, match="execute_replicated"):
        exe(np.ones(2, np.float32))


# -- compile errors and options -------------------------------------------------------------------
def test_compile_errors(add23: Any, make_computation: Any) -> None:
    MlirComputation = make_computation
    s = Shape.array_shape(np.float32, (2,))
    bad = MlirComputation("bad", "module { this is not mlir }", [s], s)
    with pytest.raises(CompileError, match="compiling 'bad' failed"):
        rt.compile(bad)
    empty = MlirComputation("empty", "module {}", [s], s)
    with pytest.raises(CompileError, match="main"):
        rt.compile(empty)
    with pytest.raises(CompileError, match="xla_no_such_flag"):
        rt.compile(add23, options=rt.CompileOptions(env_option_overrides={"xla_no_such_flag": True}))
    with pytest.raises(TypeError, match="expected an XlaComputation"):
        rt.compile(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="CompileOptions"):
        rt.compile(add23, options={"num_replicas": 1})  # type: ignore[arg-type]
    with pytest.raises(rt.UnknownDeviceError):
        rt.compile(add23, "cpu:77")


def test_compile_error_for_wrong_output_count(add23: Any, make_computation: Any) -> None:
    MlirComputation = make_computation
    s = Shape.array_shape(np.float32, (2, 3))
    lying = MlirComputation("lying", add23._mlir_module_text(), [s, s], Shape.tuple_shape([s, s]))
    with pytest.raises(CompileError, match="1 outputs"):
        rt.compile(lying)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_replicas": 0}, "num_replicas must be an int >= 1"),
        ({"num_partitions": 1.5}, "num_partitions must be an int >= 1"),
        ({"num_replicas": True}, "num_replicas"),
        ({"device_assignment": [[0, 0]]}, "distinct"),
        ({"device_assignment": [[-1]]}, "distinct and >= 0"),
        ({"device_assignment": "0"}, "2-D array"),
        ({"device_assignment": [[0.5]]}, "2-D array"),
        ({"env_option_overrides": {"not_xla": 1}}, "not an XLA option name"),
        ({"env_option_overrides": {"xla_dump_to": None}}, "must be a str, bool, int or float"),
        ({"env_option_overrides": [("xla_a",)]}, "not a \\(name, value\\) pair"),
        ({"env_option_overrides": 5}, "mapping or a list"),
    ],
)
def test_compile_options_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(CompileError, match=match):
        rt.CompileOptions(**kwargs)


def test_compile_options_surface(tmp_path: Any) -> None:
    o = rt.CompileOptions(env_option_overrides=[("xla_cpu_enable_fast_math", False)], xla_dump_to=tmp_path)
    assert o.env_option_overrides == (("xla_cpu_enable_fast_math", False), ("xla_dump_to", str(tmp_path)))
    o.num_replicas = 2
    o.device_assignment = [3, 1]
    assert o.device_assignment == ((3,), (1,))
    assert o.num_devices == 2
    assert "num_replicas=2" in repr(o)
    with pytest.raises(CompileError):
        o.num_replicas = -3


def test_xla_dump_to_writes_files(add23: Any, tmp_path: Any) -> None:
    exe = rt.compile(add23, options=rt.CompileOptions(xla_dump_to=tmp_path / "dump"))
    np.testing.assert_array_equal(exe(A, B).to_numpy(), A + B)
    names = os.listdir(tmp_path / "dump")
    assert any("before_optimizations" in n for n in names)
    assert any("after_optimizations" in n for n in names)


def test_assignment_shape_must_match_counts(add23: Any, cpu4: rt.Client) -> None:
    opts = rt.CompileOptions(num_replicas=2, device_assignment=[[0, 1]])
    expected = r"has shape \[1, 2\], expected \[num_replicas, num_partitions\] = \[2, 1\]"
    with pytest.raises(CompileError, match=expected):
        rt.compile(add23, cpu4.devices()[0], options=opts)


def test_too_few_devices(allreduce_replica_id: Any) -> None:
    with pytest.raises(CompileError, match=r"needs 4 devices .* num_devices=4"):
        rt.compile(allreduce_replica_id, options=rt.CompileOptions(num_replicas=4))


# -- introspection --------------------------------------------------------------------------------
def test_shapes_devices_repr(add_exe: rt.Executable) -> None:
    f32 = Shape.array_shape(np.float32, (2, 3))
    assert add_exe.input_shapes == (f32, f32)
    assert add_exe.output_shapes == (f32,)
    assert add_exe.program_shape().parameter_names() == ("a", "b")
    assert add_exe.devices == (rt.devices()[0],)
    assert add_exe.client is rt.client()
    assert add_exe.name == "add"
    assert (add_exe.num_replicas, add_exe.num_partitions) == (1, 1)
    assert repr(add_exe) == "Executable('add', (a: f32[2,3], b: f32[2,3]) -> f32[2,3], devices=[cpu:0])"


def test_hlo_text_is_optimized_hlo(add_exe: rt.Executable) -> None:
    text = add_exe.hlo_text()
    assert text.startswith("HloModule")
    assert "is_scheduled=true" in text
    assert "add" in text
    assert add_exe._hlo_modules()[0].to_string().startswith("HloModule")


def test_cost_analysis_of_a_matmul(matmul: Any) -> None:
    exe = rt.compile(matmul)
    costs = exe.cost_analysis()
    assert costs["flops"] == 2 * 4 * 8 * 16
    assert all(isinstance(v, float) for v in costs.values())
    assert costs["bytes accessed"] >= (4 * 8 + 8 * 16 + 4 * 16) * 4
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(exe(x, y).to_numpy(), x @ y, rtol=1e-5, atol=1e-5)


def test_memory_stats_match_known_sizes(add_exe: rt.Executable, matmul: Any) -> None:
    m = add_exe.memory_stats()
    assert isinstance(m, rt.MemoryStats)
    assert m.argument_size_in_bytes == 2 * 6 * 4
    assert m.output_size_in_bytes == 6 * 4
    assert m.temp_size_in_bytes >= 0 and m.alias_size_in_bytes == 0
    assert m.peak_memory_in_bytes >= m.argument_size_in_bytes
    assert m.as_dict()["output_size_in_bytes"] == 24
    mm = rt.compile(matmul).memory_stats()
    assert mm.argument_size_in_bytes == (4 * 8 + 8 * 16) * 4
    assert mm.output_size_in_bytes == 4 * 16 * 4


def test_fingerprint(add_exe: rt.Executable, matmul: Any) -> None:
    fp = add_exe.fingerprint
    assert isinstance(fp, str) and fp
    assert rt.compile(matmul).fingerprint != fp


# -- serialization (case C-14) --------------------------------------------------------------------
C14_A = np.array([1, 2, 3], np.float32)
C14_B = np.array([4, 5, 6], np.float32)
C14_OUT = np.array([5, 12, 21], np.float32)


def test_c14_serialize_round_trip(mul_add3: Any, tmp_path: Any) -> None:
    exe = rt.compile(mul_add3)
    np.testing.assert_array_equal(exe(C14_A, C14_B).to_numpy(), C14_OUT)
    blob = exe.serialize()
    assert isinstance(blob, bytes)

    same = rt.deserialize_executable(blob)
    np.testing.assert_array_equal(same(C14_A, C14_B).to_numpy(), C14_OUT)
    assert same.fingerprint == exe.fingerprint
    assert same.program_shape() == exe.program_shape()
    assert same.program_shape().parameter_names() == ("a", "b")
    with pytest.raises(ShapeError, match=r"f: argument 1 \('b'\)"):
        same(C14_A, C14_B.reshape(3, 1))

    other_client = rt.client("cpu", cached=False)
    other = rt.deserialize_executable(blob, other_client.devices()[0])
    assert other.devices[0].client is other_client
    out = other(C14_A, C14_B)
    assert out.device.client is other_client
    np.testing.assert_array_equal(out.to_numpy(), C14_OUT)

    path = tmp_path / "f.xlaexe"
    exe.save(path)
    loaded = rt.load_executable(path, "cpu:0")
    np.testing.assert_array_equal(loaded(C14_A, C14_B).to_numpy(), C14_OUT)


def test_deserialize_onto_another_device(mul_add3: Any, cpu4: rt.Client) -> None:
    blob = rt.compile(mul_add3, cpu4.devices()[1]).serialize()
    for dev in (cpu4.devices()[2], rt.devices()[0], rt.client("cpu", cached=False).devices()[0]):
        exe = rt.deserialize_executable(blob, dev)
        assert exe.devices == (dev,)
        out = exe(C14_A, rt.device_put(C14_B, dev))
        assert out.device is dev
        np.testing.assert_array_equal(out.to_numpy(), C14_OUT)


def test_c14_with_a_builder_computation() -> None:
    import xlasdk as xs
    from xlasdk import ops

    b = xs.XlaBuilder("f")
    s = xs.Shape.array_shape(np.float32, (3,))
    a, bb = ops.Parameter(b, 0, s, "a"), ops.Parameter(b, 1, s, "b")
    comp = b.build(ops.Add(ops.Mul(a, bb), a))
    exe = rt.compile(comp)
    np.testing.assert_array_equal(exe(C14_A, C14_B).to_numpy(), C14_OUT)
    assert "metadata=" in exe.hlo_text()
    again = rt.deserialize_executable(exe.serialize(), rt.client("cpu", cached=False).devices()[0])
    np.testing.assert_array_equal(again(C14_A, C14_B).to_numpy(), C14_OUT)


def test_c14_corrupt_blobs_raise_format_error_in_a_surviving_process(mul_add3: Any) -> None:
    blob = rt.compile(mul_add3).serialize()
    code = textwrap.dedent(
        """
        import sys
        import xlasdk.runtime as rt
        from xlasdk.errors import FormatError
        blob = sys.stdin.buffer.read()
        for label, data in [("half", blob[: len(blob) // 2]), ("garbage", b"garbage")]:
            try:
                rt.deserialize_executable(data)
            except FormatError as e:
                print(label, "FormatError", e)
            else:
                print(label, "LOADED")
        print("SURVIVED")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, input=blob, capture_output=True, timeout=120
    )
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert "half FormatError deserialize_executable: truncated" in out
    assert "garbage FormatError deserialize_executable: not an xlasdk serialized executable" in out
    assert "SURVIVED" in out


def _corruptions(blob: bytes) -> list[tuple[Any, str]]:
    flipped = bytearray(blob)
    flipped[len(blob) // 2] ^= 0xFF
    return [
        (b"", "empty"),
        (blob[:10], "truncated"),
        (blob[:-1], "truncated"),
        (blob + b"x", "trailing data"),
        (bytes(flipped), "checksum mismatch"),
        (b"garbage", "not an xlasdk serialized executable"),
        ("text", "expected bytes"),
        (blob[:18] + b"\x09\x00\x00\x00" + blob[22:], "format version 9"),
    ]


def test_corrupt_blobs_are_caught_before_xla(mul_add3: Any) -> None:
    # All these are rejected by xlasdk's own header and checksum checks, never handed to XLA.
    blob = rt.compile(mul_add3).serialize()
    for data, match in _corruptions(blob):
        with pytest.raises(FormatError, match=match):
            rt.deserialize_executable(data)
    assert isinstance(FormatError("x"), XlaSdkError)


def test_blob_for_another_platform_or_jaxlib(mul_add3: Any, monkeypatch: Any) -> None:
    import json
    import struct
    import zlib

    from xlasdk.runtime import _serial_format as ex

    blob = rt.compile(mul_add3).serialize()
    fixed = len(ex._MAGIC) + ex._PREFIX.size
    _, hlen, blen, _ = ex._PREFIX.unpack_from(blob, len(ex._MAGIC))
    header = json.loads(blob[fixed : fixed + hlen])
    xla_blob = blob[fixed + hlen :]

    def rebuild(**changes: Any) -> bytes:
        h = json.dumps({**header, **changes}).encode()
        crc = zlib.crc32(xla_blob, zlib.crc32(h))
        return ex._MAGIC + struct.pack("<IIQI", 1, len(h), blen, crc) + h + xla_blob

    with pytest.raises(FormatError, match="serialized with jaxlib 0.0.1"):
        rt.deserialize_executable(rebuild(jaxlib="0.0.1"))
    with pytest.raises(FormatError, match="compiled for tpu"):
        rt.deserialize_executable(rebuild(platform="tpu"))
    with pytest.raises(FormatError, match="corrupt header"):
        rt.deserialize_executable(rebuild(parameters="nope"))
    # XLA's own rejection of a bad executable body is a FormatError too
    bad_body = b"\x00" * len(xla_blob)
    h = json.dumps(header).encode()
    crc = zlib.crc32(bad_body, zlib.crc32(h))
    with pytest.raises(FormatError, match="XLA could not load"):
        rt.deserialize_executable(ex._MAGIC + struct.pack("<IIQI", 1, len(h), blen, crc) + h + bad_body)


def test_load_executable_file_errors(tmp_path: Any) -> None:
    with pytest.raises(FormatError, match=r"missing.xlaexe.*cannot read the file"):
        rt.load_executable(tmp_path / "missing.xlaexe")
    empty = tmp_path / "empty.xlaexe"
    empty.write_bytes(b"")
    with pytest.raises(FormatError, match=r"empty.xlaexe.*empty"):
        rt.load_executable(empty)


# -- replicas -------------------------------------------------------------------------------------
def test_execute_replicated_all_reduce_and_replica_id(allreduce_replica_id: Any, cpu4: rt.Client) -> None:
    exe = rt.compile(allreduce_replica_id, cpu4.devices()[0], options=rt.CompileOptions(num_replicas=4))
    assert exe.devices == tuple(cpu4.devices())
    assert exe.num_replicas == 4
    xs = [np.array([1, 2], np.float32) * (i + 1) for i in range(4)]
    outs = exe.execute_replicated([[x] for x in xs])
    assert len(outs) == 4
    for i, (total, rid) in enumerate(outs):
        assert total.device is cpu4.devices()[i] and rid.device is cpu4.devices()[i]
        np.testing.assert_array_equal(total.to_numpy(), sum(xs))
        assert rid.to_numpy() == i and rid.dtype == np.uint32
    # device arrays already on their devices, and a serialize round trip
    placed = [[rt.device_put(x, d)] for x, d in zip(xs, cpu4.devices(), strict=True)]
    again = rt.deserialize_executable(exe.serialize(), cpu4.devices()[0])
    assert again.devices == exe.devices
    for total, _rid in again.execute_replicated(placed):
        np.testing.assert_array_equal(total.to_numpy(), sum(xs))
    fresh = rt.client("cpu", num_devices=4, cached=False)
    moved = rt.deserialize_executable(exe.serialize(), fresh.devices()[0])
    assert [d.client for d in moved.devices] == [fresh] * 4
    assert [int(rid.to_numpy()) for _, rid in moved.execute_replicated([[x] for x in xs])] == [0, 1, 2, 3]
    with pytest.raises(rt.UnknownDeviceError, match=r"needs devices \[0, 1, 2, 3\]"):
        rt.deserialize_executable(exe.serialize())  # the default client has 1 device


def test_execute_replicated_custom_assignment(replica_id_only: Any, cpu4: rt.Client) -> None:
    opts = rt.CompileOptions(num_replicas=4, device_assignment=[[3], [2], [1], [0]])
    exe = rt.compile(replica_id_only, cpu4.devices()[0], options=opts)
    assert [d.id for d in exe.devices] == [3, 2, 1, 0]
    outs = exe.execute_replicated([[np.full(2, i, np.float32)] for i in range(4)])
    for i, (rid, x) in enumerate(outs):
        assert rid.to_numpy() == i
        assert rid.device.id == 3 - i
        np.testing.assert_array_equal(x.to_numpy(), np.full(2, i, np.float32))


def test_execute_replicated_with_partitions(replica_id_only: Any, cpu4: rt.Client) -> None:
    opts = rt.CompileOptions(num_replicas=2, num_partitions=2)
    exe = rt.compile(replica_id_only, cpu4.devices()[0], options=opts)
    outs = exe.execute_replicated([[np.full(2, i, np.float32)] for i in range(4)])
    assert [int(rid.to_numpy()) for rid, _ in outs] == [0, 0, 1, 1]
    assert [float(x.to_numpy()[0]) for _, x in outs] == [0, 1, 2, 3]


def test_execute_replicated_errors(allreduce_replica_id: Any, cpu4: rt.Client) -> None:
    exe = rt.compile(allreduce_replica_id, cpu4.devices()[0], options=rt.CompileOptions(num_replicas=4))
    ok = np.ones(2, np.float32)
    with pytest.raises(ShapeError, match="one argument list per device"):
        exe.execute_replicated([[ok]] * 3)
    with pytest.raises(ShapeError, match="list of 4 argument lists"):
        exe.execute_replicated(ok)  # type: ignore[arg-type]
    expected = r"device 2 \(cpu:2\), argument 0 \('x'\) is f32\[3\], expected f32\[2\]"
    with pytest.raises(ShapeError, match=expected):
        exe.execute_replicated([[ok], [ok], [np.ones(3, np.float32)], [ok]])
    with pytest.raises(ShapeError, match=r"device 1 \(cpu:1\), expected 1 argument"):
        exe.execute_replicated([[ok], [ok, ok], [ok], [ok]])


def test_single_device_execute_replicated(add_exe: rt.Executable) -> None:
    [out] = add_exe.execute_replicated([[A, B]])
    assert isinstance(out, rt.DeviceArray)
    np.testing.assert_array_equal(out.to_numpy(), A + B)
