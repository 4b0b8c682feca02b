"""Finding accelerators as JAX does: libtpu, the PCI bus, XLASDK_PLATFORMS / JAX_PLATFORMS, and the
errors of a TPU that is absent or held by another process."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from xlasdk.runtime import accelerators, plugins

REPO = Path(__file__).resolve().parents[2]
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None


def _pci(root: Path, slot: str, vendor: str, device: str) -> None:
    d = root / slot
    d.mkdir(parents=True)
    (d / "vendor").write_text(vendor + "\n")
    (d / "device").write_text(device + "\n")


def test_tpu_chips_are_read_from_the_pci_bus(tmp_path: Path) -> None:
    assert accelerators.tpu_chips(str(tmp_path)) == (0, None)
    _pci(tmp_path, "0000:00:04.0", "0x1ae0", "0x0063")  # a v5e
    _pci(tmp_path, "0000:00:05.0", "0x1ae0", "0x0001")  # Google, not a TPU (a gVNIC, say)
    _pci(tmp_path, "0000:00:06.0", "0x10de", "0x0063")  # another vendor with the same device id
    assert accelerators.tpu_chips(str(tmp_path)) == (1, "v5e")
    _pci(tmp_path, "0000:00:07.0", "0x1ae0", "0x0063")
    assert accelerators.tpu_chips(str(tmp_path)) == (2, "v5e")


def test_tpu_holders_are_read_from_proc(tmp_path: Path) -> None:
    for pid, target in ((101, "/dev/vfio/0"), (102, "/tmp/libtpu_lockfile"), (103, "/dev/null"),
                        (os.getpid(), "/dev/accel0")):
        fd = tmp_path / str(pid) / "fd"
        fd.mkdir(parents=True)
        (fd / "3").symlink_to(target)
    assert accelerators.tpu_holders(str(tmp_path)) == [101, 102]


def test_requested_platforms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XLASDK_PLATFORMS", raising=False)
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    assert accelerators.requested_platforms() is None
    monkeypatch.setenv("JAX_PLATFORMS", "TPU, cpu")
    assert accelerators.requested_platforms() == (("tpu", "cpu"), "JAX_PLATFORMS")
    monkeypatch.setenv("XLASDK_PLATFORMS", "cpu")  # xlasdk's own wins
    assert accelerators.requested_platforms() == (("cpu",), "XLASDK_PLATFORMS")
    monkeypatch.setenv("XLASDK_PLATFORMS", " , ")
    assert accelerators.requested_platforms() == (("tpu", "cpu"), "JAX_PLATFORMS")


def test_attached_accelerator_needs_both_the_hardware_and_its_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    def installed(names: set[str]) -> Callable[[], set[str]]:
        def ask() -> set[str]:
            asked.append(1)
            return names
        return ask

    monkeypatch.setattr(accelerators, "tpu_chips", lambda root="": (1, "v5e"))
    monkeypatch.setattr(accelerators, "nvidia_gpu_visible", lambda: False)
    assert accelerators.attached_accelerator(installed({"tpu"})) == "tpu"
    assert accelerators.attached_accelerator(installed(set())) is None
    monkeypatch.setattr(accelerators, "tpu_chips", lambda root="": (0, None))
    asked.clear()
    assert accelerators.attached_accelerator(installed({"tpu", "cuda"})) is None
    assert not asked  # no hardware: the plugins are not even looked for
    monkeypatch.setattr(accelerators, "nvidia_gpu_visible", lambda: True)
    assert accelerators.attached_accelerator(installed({"tpu", "cuda"})) == "cuda"


def test_libtpu_is_found_as_jax_finds_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lib = tmp_path / "libtpu.so"
    lib.write_bytes(b"\x7fELF")
    monkeypatch.setenv("TPU_LIBRARY_PATH", str(lib))
    info = plugins._from_libtpu()
    assert info is not None and info.name == "tpu" and info.library_path == str(lib) and info.problem is None
    assert info.options == {"ml_framework_name": "xlasdk", "ml_framework_version": plugins.framework_options()[
        "ml_framework_version"]}
    monkeypatch.setenv("TPU_LIBRARY_PATH", str(tmp_path / "missing.so"))
    info = plugins._from_libtpu()
    assert info is not None and info.problem is not None and "TPU_LIBRARY_PATH names no file" in info.problem
    monkeypatch.delenv("TPU_LIBRARY_PATH")
    info = plugins._from_libtpu()
    if HAS_LIBTPU:
        assert info is not None and info.source == "libtpu package" and info.library_path is not None
        assert info.library_path.endswith("libtpu.so") and os.path.isfile(info.library_path)
    else:
        assert info is None


def test_client_errors_say_what_to_do() -> None:
    e = plugins.explain_client_error("tpu", "/x/libtpu.so", "NOT_FOUND: TPU initialization failed: No jellyfish "
                                     "device found.")
    assert "this machine has no TPU chip" in str(e) and "xs.topology('v5e:1x1')" in str(e)
    e = plugins.explain_load_error("tpu", "/x/libtpu.so", "ABORTED: Internal error when accessing libtpu "
                                   "multi-process lockfile.")
    assert "held by" in str(e) and "one process at a time" in str(e)


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("XLASDK_PLATFORMS", "JAX_PLATFORMS")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=REPO,
                          env=full)


def test_without_a_chip_the_cpu_stays_the_default_and_the_tpu_is_not_touched() -> None:
    r = _run("import xlasdk as xs\n"
             "from xlasdk._jaxlib import pjrt\n"
             "print(xs.default_device(), [str(d) for d in xs.devices()], pjrt.plugin_loaded('tpu'))\n")
    assert r.returncode == 0 and r.stdout.split() == ["cpu:0", "['cpu:0']", "False"], (r.stdout, r.stderr[-400:])


def test_xlasdk_platforms_pins_the_default() -> None:
    r = _run("import xlasdk as xs; print(xs.default_device())", XLASDK_PLATFORMS="cpu")
    assert r.returncode == 0 and r.stdout.strip() == "cpu:0", r.stderr[-400:]
    r = _run("import xlasdk as xs\ntry:\n    xs.devices()\nexcept xs.XlaSdkError as e:\n    print(type(e).__name__, e)",
             XLASDK_PLATFORMS="nosuch")
    assert "UnknownDeviceError" in r.stdout and "'nosuch'" in r.stdout, (r.stdout, r.stderr[-400:])


@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
def test_asking_for_a_tpu_on_a_machine_without_one_says_so_and_never_falls_back() -> None:
    if accelerators.tpu_chips()[0]:
        pytest.skip("this machine has a TPU")
    code = ("import xlasdk as xs\ntry:\n    print(xs.devices())\n"
            "except xs.XlaSdkError as e:\n    print(type(e).__name__, e)\n")
    for env in ({"XLASDK_PLATFORMS": "tpu"}, {"JAX_PLATFORMS": "tpu"}, {}):
        c = code if env else code.replace("xs.devices()", "xs.devices('tpu')")
        r = _run(c, **env)
        assert r.stdout.startswith("PluginError TPU initialization failed: this machine has no TPU chip"), (
            env, r.stdout, r.stderr[-400:])


def test_an_attached_tpu_whose_libtpu_is_broken_is_an_error_not_the_cpu(tmp_path: Path) -> None:
    """A TPU on the PCI bus (faked here) with TPU_LIBRARY_PATH naming no file: the default platform is
    still the TPU, so the user gets the plugin's problem, not a quiet run on the CPU."""
    code = ("from xlasdk.runtime import accelerators\n"
            "accelerators.tpu_chips = lambda root='': (1, 'v5e')\n"
            "import xlasdk as xs\n"
            "try:\n    print(xs.devices())\nexcept xs.XlaSdkError as e:\n    print(type(e).__name__, e)\n")
    r = _run(code, TPU_LIBRARY_PATH=str(tmp_path / "missing.so"))
    assert r.stdout.startswith("PluginError") and "TPU_LIBRARY_PATH names no file" in r.stdout, (
        r.stdout, r.stderr[-400:])
