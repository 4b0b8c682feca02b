"""PJRT plugin discovery (xlasdk/runtime/plugins.py) and its errors, with fake plugins.

The fakes are laid out as the real wheels are: ``jax-cuda12-pjrt`` 0.10.2 installs
``jax_plugins/xla_cuda12/{__init__.py, xla_cuda_plugin.so}`` and declares the entry point
``[jax_plugins] xla_cuda12 = jax_plugins.xla_cuda12``. Plugin modules import ``jax``, so their
``__init__`` here raises: discovery must never import them. A tiny C library exporting
``GetPjrtApi`` with a wrong PJRT C API version checks jaxlib's version check (needs a C compiler).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import xlasdk as xs
from xlasdk._jaxlib import pjrt
from xlasdk.runtime import device, plugins

JAXLIB = pjrt.JAXLIB_VERSION
BOOBY_TRAP = "raise ImportError('a plugin module was imported: it imports jax, xlasdk must not')\n"


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An extra site directory on sys.path, and plugin discovery forgotten before and after."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(plugins.ENV_PLUGINS, raising=False)
    monkeypatch.delenv(plugins.ENV_SKIP_VERSION_CHECK, raising=False)
    for name in [m for m in sys.modules if m == "jax_plugins" or m.startswith("jax_plugins.")]:
        monkeypatch.delitem(sys.modules, name)
    import importlib

    importlib.invalidate_caches()
    if plugins.find_plugin("cuda", refresh=True) is not None:
        pytest.skip("a real CUDA PJRT plugin is installed here: the fakes would compete with it")
    yield tmp_path
    importlib.invalidate_caches()
    for name in [m for m in sys.modules if m == "jax_plugins" or m.startswith("jax_plugins.")]:
        del sys.modules[name]
    monkeypatch.undo()
    plugins.plugins(refresh=True)


def make_wheel(site: Path, dist: str, version: str, module: str, library: str, entry_point: bool = True) -> Path:
    """Install a fake plugin wheel into ``site``: the package, its library file and dist-info."""
    pkg = site / "jax_plugins" / module
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(BOOBY_TRAP)
    lib = pkg / library
    lib.write_bytes(b"not a shared library")
    if entry_point:
        info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[jax_plugins]\n{module} = jax_plugins.{module}\n")
        (info / "RECORD").write_text("")
    return lib


def test_entry_point_of_the_cuda_wheel_found_without_importing_it(site: Path) -> None:
    lib = make_wheel(site, "jax-cuda12-pjrt", JAXLIB, "xla_cuda12", "xla_cuda_plugin.so")
    found = {p.name: p for p in plugins.plugins(refresh=True)}
    cuda = found["cuda"]
    assert cuda.library_path == str(lib)
    assert cuda.source == "entry point jax_plugins:xla_cuda12"
    assert (cuda.module, cuda.distribution, cuda.version, cuda.problem) == (
        "jax_plugins.xla_cuda12", "jax-cuda12-pjrt", JAXLIB, None,
    )
    assert "jax_plugins.xla_cuda12" not in sys.modules
    assert plugins.find_plugin("gpu") == cuda


def test_namespace_package_plugin(site: Path) -> None:
    lib = make_wheel(site, "unused", "1.0", "xla_rocm7", "pjrt_rocm_plugin.so", entry_point=False)
    (lib.parent / "libhelper.so").write_bytes(b"x")  # the PJRT library is the one named *plugin* / *pjrt*
    rocm = plugins.find_plugin("rocm", refresh=True)
    assert rocm is not None and rocm.library_path == str(lib)
    assert rocm.source == "namespace package jax_plugins.xla_rocm7" and rocm.problem is None
    assert "jax_plugins.xla_rocm7" not in sys.modules


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("jax_plugins.xla_cuda12", "cuda"), ("jax_plugins.xla_rocm7", "rocm"),
        ("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt"), ("jax_plugins.metal", "metal"), ("jax_plugins.xla_tpu", "tpu"),
    ],
)
def test_platform_names(module: str, name: str) -> None:
    assert plugins.platform_name(module) == name


def test_version_mismatch_is_refused_before_loading(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_wheel(site, "jax-cuda12-pjrt", "0.9.1", "xla_cuda12", "xla_cuda_plugin.so")
    plugins.plugins(refresh=True)
    with pytest.raises(xs.PluginError) as e:
        xs.client("cuda")
    msg = str(e.value)
    assert "jax-cuda12-pjrt 0.9.1 is built for jaxlib 0.9.1" in msg and f"this is jaxlib {JAXLIB}" in msg
    assert f"pip install 'jax-cuda12-pjrt=={JAXLIB}'" in msg and "entry point jax_plugins:xla_cuda12" in msg
    assert "cuda" not in device._plugins and not pjrt.plugin_loaded("cuda")
    # the override lets it through to the loader, which finds that the file is not a library
    monkeypatch.setenv(plugins.ENV_SKIP_VERSION_CHECK, "1")
    plugins.plugins(refresh=True)
    info = plugins.find_plugin("cuda")
    assert info is not None and info.problem is None


def test_bad_library_gives_a_plugin_error(site: Path) -> None:
    lib = make_wheel(site, "jax-cuda12-pjrt", JAXLIB, "xla_cuda12", "xla_cuda_plugin.so")
    plugins.plugins(refresh=True)
    with pytest.raises(xs.PluginError) as e:
        xs.client("cuda")  # found, then loaded: the fake file is no shared library
    msg = str(e.value)
    assert f"PJRT plugin 'cuda' from {lib}" in msg and "not a loadable shared library" in msg
    assert "CUDA runtime" in msg and "file too short" in msg
    assert isinstance(e.value, xs.XlaRuntimeError)
    assert "cuda" not in device._plugins


def test_missing_plugin_says_how_to_install_it(site: Path) -> None:
    with pytest.raises(xs.UnknownDeviceError) as e:
        xs.client("cuda")
    msg = str(e.value)
    assert f"jax-cuda12-plugin[with-cuda]=={JAXLIB}" in msg and "PJRT_NAMES_AND_LIBRARY_PATHS" in msg
    with pytest.raises(xs.UnknownDeviceError, match="no PJRT client for platform 'nosuchaccel'"):
        xs.devices("nosuchaccel")


def test_env_variable_plugins(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    libm = shutil.which("true")  # any existing file that is not a PJRT plugin
    assert libm is not None
    config = site / "acc.json"
    config.write_text(json.dumps({"library_path": libm, "create_options": {"visible_devices": [0]}}))
    monkeypatch.setenv(
        plugins.ENV_PLUGINS, f"envmissing:/nonexistent/p.so,envjson:{config},broken,envlib:{libm}"
    )
    found = {p.name: p for p in plugins.plugins(refresh=True)}
    assert found["envmissing"].problem == "no such file: /nonexistent/p.so"
    assert found["envjson"].library_path == libm and found["envjson"].options == {"visible_devices": [0]}
    assert "expected NAME:PATH" in str(found["broken"].problem)
    with pytest.raises(xs.PluginError, match="no such file: /nonexistent/p.so"):
        xs.client("envmissing")
    with pytest.raises(xs.PluginError, match="not a loadable shared library"):
        xs.client("envlib")


def test_library_without_get_pjrt_api(tmp_path: Path) -> None:
    import ctypes.util

    found = ctypes.util.find_library("m")
    paths = ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6")
    candidates = [p for p in paths if os.path.exists(p)]
    if not candidates:
        pytest.skip(f"no libm file here ({found})")
    with pytest.raises(xs.PluginError, match="not a PJRT plugin .it exports no GetPjrtApi"):
        xs.load_pjrt_plugin("notpjrtlibm", candidates[0])


FAKE_C = r"""
#include <stddef.h>
#include <string.h>
typedef struct { size_t struct_size; void* ext; int major_version; int minor_version; } V;
typedef struct { size_t struct_size; void* ext; V v; void* fns[256]; } Api;
static Api api;
const Api* GetPjrtApi(void) {
  memset(&api, 0, sizeof api);
  api.struct_size = sizeof(Api); api.v.struct_size = sizeof(V);
  api.v.major_version = 99; api.v.minor_version = 0;
  return &api;
}
"""


def test_pjrt_c_api_version_mismatch(tmp_path: Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake plugin")
    src = tmp_path / "fake.c"
    src.write_text(FAKE_C)
    lib = tmp_path / "fake_pjrt_plugin.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=60)
    with pytest.raises(xs.PluginError) as e:
        xs.load_pjrt_plugin("fakeapi99", lib)
    msg = str(e.value)
    assert "PJRT C API version does not match" in msg
    assert "Mismatched PJRT plugin PJRT API major version (99)" in msg
    # jaxlib keeps the name: a second attempt says what happened the first time, without a crash
    with pytest.raises(xs.PluginError, match="an earlier attempt in this process"):
        xs.load_pjrt_plugin("fakeapi99", lib)


def _real_cpu_wheel_installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("xla_plugins.xla_cpu_pjrt") is not None
    except ImportError:
        return False


@pytest.mark.skipif(not _real_cpu_wheel_installed(), reason="PyPI's xla-cpu-pjrt wheel is not installed")
def test_real_cpu_plugin_wheel_found_by_its_entry_point_and_run() -> None:
    # In a child process: a loaded plugin stays for the whole process.
    code = (
        "import numpy as np, xlasdk as xs\n"
        "from xlasdk import ops\n"
        "from xlasdk.runtime import plugins\n"
        "p = plugins.find_plugin('xla_cpu_pjrt')\n"
        "print('FOUND', p.source, p.distribution, p.version, p.library_path.endswith('xla_cpu_pjrt.so'), p.problem)\n"
        "b = xs.XlaBuilder('f')\n"
        "x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)), 'x')\n"
        "exe = xs.compile(b.build(x * 2.0 + 1.0), device='xla_cpu_pjrt:0')\n"
        "print('RESULT', exe.devices[0].platform, exe(np.arange(3, dtype=np.float32)).to_numpy().tolist())\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FOUND entry point xla_plugins:xla_cpu_pjrt xla_cpu_pjrt 0.0.1 True None" in proc.stdout
    assert "RESULT cpu [1.0, 3.0, 5.0]" in proc.stdout
