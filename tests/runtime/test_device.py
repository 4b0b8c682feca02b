"""Clients and devices: xs.devices, xs.client, device strings, plugin loading errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

import xlasdk.runtime as rt
from xlasdk.errors import FormatError, XlaRuntimeError, XlaSdkError
from xlasdk.runtime.device import _resolve_device

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_default_devices() -> None:
    devs = rt.devices()
    assert len(devs) >= 1
    d = devs[0]
    assert isinstance(d, rt.Device)
    assert d.id == 0
    assert d.platform == "cpu"
    assert isinstance(d.device_kind, str) and d.device_kind
    assert str(d) == "cpu:0"
    assert "cpu:0" in repr(d)
    assert rt.devices("cpu") == devs
    assert rt.default_device() is d


def test_client_is_cached_and_described() -> None:
    c = rt.client()
    assert c is rt.client("cpu") is rt.client("CPU") is rt.client("host")
    assert c.platform == "cpu"
    assert isinstance(c.platform_version, str)
    assert c.devices() == rt.devices()
    assert c.device(0) is c.devices()[0] is c.default_device
    assert c.device_count == len(c.devices())
    assert rt.devices()[0].client is c
    assert "cpu" in repr(c)
    # the same count as the default client is the default client
    assert rt.client("cpu", num_devices=c.device_count) is c


def test_multi_device_cpu_client(cpu4: rt.Client) -> None:
    assert cpu4 is rt.client("cpu", num_devices=4)
    devs = cpu4.devices()
    assert [d.id for d in devs] == [0, 1, 2, 3]
    assert [str(d) for d in devs] == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    assert cpu4.device(3) is devs[3]
    # devices of different clients are different devices, even with the same id
    assert devs[0] != rt.devices()[0]
    assert len({devs[0], rt.devices()[0], devs[0]}) == 2
    with pytest.raises(rt.UnknownDeviceError, match="no device 9"):
        cpu4.device(9)


def test_uncached_client_is_independent() -> None:
    a = rt.client("cpu", cached=False)
    b = rt.client("cpu", cached=False)
    assert a is not b and a is not rt.client()
    assert a.devices()[0] != b.devices()[0]
    assert str(a.devices()[0]) == "cpu:0"


def test_device_equality_and_hash() -> None:
    d = rt.devices()[0]
    assert d == rt.client().device(0)
    assert hash(d) == hash(rt.client().device(0))
    assert d != "cpu:0"
    assert {d: 1}[rt.devices()[0]] == 1


def test_resolve_device_forms() -> None:
    d0 = rt.devices()[0]
    assert _resolve_device(None) is d0
    assert _resolve_device(d0) is d0
    assert _resolve_device("cpu:0") is d0
    assert _resolve_device(" cpu : 0 ") is d0
    assert _resolve_device("cpu") is d0
    assert _resolve_device("CPU:0") is d0
    assert _resolve_device(0) is d0


@pytest.mark.parametrize(
    ("device", "match"),
    [
        ("xpu:0", "no PJRT client for platform 'xpu'"),
        ("cpu:99", "unknown device 'cpu:99'"),
        ("cpu:-1", "not of the form"),
        ("", "not of the form"),
        ("cpu:0:1", "not of the form"),
        (3.5, "got float"),
        (True, "got bool"),
        (99, "no device 99"),
    ],
)
def test_resolve_device_errors(device: Any, match: str) -> None:
    with pytest.raises(rt.UnknownDeviceError, match=match) as info:
        _resolve_device(device)
    assert isinstance(info.value, XlaSdkError)
    assert isinstance(info.value, ValueError)


def test_unknown_cpu_device_hints_at_multi_device_clients() -> None:
    with pytest.raises(rt.UnknownDeviceError, match="xla_force_host_platform_device_count"):
        _resolve_device("cpu:7")


@pytest.mark.parametrize("n", [0, -1, True, 2.0, "4"])
def test_client_bad_num_devices(n: Any) -> None:
    with pytest.raises(rt.UnknownDeviceError, match="num_devices"):
        rt.client("cpu", num_devices=n)


def test_client_unknown_platform() -> None:
    with pytest.raises(rt.UnknownDeviceError, match="load_pjrt_plugin"):
        rt.client("nosuchplatform")
    with pytest.raises(rt.UnknownDeviceError):
        rt.client(3)  # type: ignore[arg-type]


def test_device_memory_stats_is_none_or_dict() -> None:
    stats = rt.devices()[0].memory_stats()
    assert stats is None or all(isinstance(v, int) for v in stats.values())


def test_constructors_are_private() -> None:
    with pytest.raises(TypeError):
        rt.Device()
    with pytest.raises(TypeError):
        rt.Client()


def test_load_pjrt_plugin_input_errors(tmp_path: Any) -> None:
    with pytest.raises(FormatError, match="no such file"):
        rt.load_pjrt_plugin("myplugin", tmp_path / "missing.so")
    with pytest.raises(rt.UnknownDeviceError, match="identifier"):
        rt.load_pjrt_plugin("bad name!", tmp_path / "x.so")
    with pytest.raises(rt.UnknownDeviceError, match="built-in"):
        rt.load_pjrt_plugin("cpu", tmp_path / "x.so")


def test_load_pjrt_plugin_not_a_library_raises_in_a_surviving_process(tmp_path: Any) -> None:
    # A file that is not a shared library: PJRT fails to open it; the process must survive,
    # and the default platform must stay "cpu".
    fake = tmp_path / "fake_plugin.so"
    fake.write_bytes(b"this is not an ELF file")
    code = textwrap.dedent(
        f"""
        import xlasdk.runtime as rt
        from xlasdk.errors import XlaRuntimeError
        try:
            rt.load_pjrt_plugin("fakeplugin", {str(fake)!r})
        except XlaRuntimeError as e:
            print("RAISED", e)
        print("DEFAULT", rt.devices()[0])
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "RAISED loading PJRT plugin 'fakeplugin'" in proc.stdout
    assert "DEFAULT cpu:0" in proc.stdout


def test_xla_runtime_error_is_a_runtime_error() -> None:
    assert issubclass(XlaRuntimeError, RuntimeError)


def _cpu_plugin_path() -> str | None:
    """A PJRT plugin to test with: $XLASDK_TEST_PJRT_PLUGIN, or PyPI's xla-cpu-pjrt if installed."""
    path = os.environ.get("XLASDK_TEST_PJRT_PLUGIN")
    if path:
        return path
    import importlib.util

    try:
        spec = importlib.util.find_spec("xla_plugins.xla_cpu_pjrt")
    except ImportError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        candidate = os.path.join(loc, "xla_cpu_pjrt.so")
        if os.path.isfile(candidate):
            return candidate
    return None


@pytest.mark.skipif(_cpu_plugin_path() is None, reason="no PJRT plugin (set XLASDK_TEST_PJRT_PLUGIN)")
def test_load_a_real_pjrt_plugin_and_run() -> None:
    # In a subprocess: loading a plugin makes it the default platform for the whole process.
    code = textwrap.dedent(
        f"""
        import numpy as np, ml_dtypes
        import xlasdk.runtime as rt
        from xlasdk.shape import ProgramShape, Shape

        class Comp:
            name = "add"
            def program_shape(self):
                s = Shape.array_shape(np.float32, (3,))
                return ProgramShape([s, s], s, ["a", "b"])
            def _mlir_module_text(self):
                t = "tensor<3xf32>"
                return ("module @add {{ func.func public @main(%a: " + t + ", %b: " + t + ") -> " + t
                        + " {{ %0 = stablehlo.add %a, %b : " + t + "\\n return %0 : " + t + " }} }}")

        c = rt.load_pjrt_plugin("testplugin", {_cpu_plugin_path()!r})
        assert rt.load_pjrt_plugin("testplugin", {_cpu_plugin_path()!r}) is c
        assert rt.client("testplugin") is c
        assert rt.devices()[0].client is c
        d = c.devices()[-1]
        assert str(d) == f"testplugin:{{d.id}}"
        exe = rt.compile(Comp(), str(d))
        x = np.array([1, 2, 3], np.float32)
        out = exe(x, rt.device_put(x, d))
        assert out.device is d
        assert np.array_equal(out.to_numpy(), 2 * x)
        again = rt.deserialize_executable(exe.serialize(), c.devices()[0])
        assert np.array_equal(again(x, x).to_numpy(), 2 * x)
        bf = rt.device_put(x.astype(ml_dtypes.bfloat16), d)
        assert np.array_equal(bf.to_numpy(), x.astype(ml_dtypes.bfloat16))
        print("PLUGIN OK")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "PLUGIN OK" in proc.stdout
