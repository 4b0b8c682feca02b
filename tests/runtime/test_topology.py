"""Compiling for a TPU without a chip: ``xs.topology`` and its compile-only devices (libtpu is a
test-only peer; the tests skip without it). CI has no TPU: everything here runs on the CPU machine."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from tests import xla_faults
from xlasdk import ops
from xlasdk._jaxlib import isolated

pytestmark = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="libtpu is not installed")

DUMPS = Path(__file__).resolve().parents[1] / "data" / "dumps"
ABORT_CASE = Path(__file__).resolve().parents[2] / "tools" / "tpu_abort_case.hlo"
REPO = Path(__file__).resolve().parents[2]


def _matmul(m: int = 128, k: int = 256, n: int = 128) -> xs.XlaComputation:
    b = xs.XlaBuilder("mm")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (m, k)), "x")
    w = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, (k, n)), "w")
    ops.Dot(x, w)
    return b.build()


def test_topologies_give_the_slices_devices() -> None:
    one = xs.topology("v5e:1x1")
    assert [d.id for d in one.devices] == [0] and one.device_kind == "TPU v5 lite" and one.platform == "tpu"
    assert xs.topology(" v5e:1x1") is one  # made once per name
    four = xs.topology("v5e:2x2")
    assert len(four.devices) == 4 and {d.device_kind for d in four.devices} == {"TPU v5 lite"}
    assert xs.topology("v6e:2x2").device_kind == "TPU v6 lite"
    assert str(one.devices[0]) == "tpu[v5e:1x1]:0" and one.devices[0].client.compile_only == "v5e:1x1"
    # a compile-only device is not the default device, nor a device string
    assert xs.default_device().platform == "cpu"


@pytest.mark.parametrize("name", ["bogus", "v5e", "v5e:3x3", "", "v5e:0x1"])
def test_a_name_libtpu_does_not_know_is_an_error(name: str) -> None:
    with pytest.raises(xs.UnknownDeviceError, match="topology"):
        xs.topology(name)


def test_only_the_tpu_compiles_without_its_hardware() -> None:
    with pytest.raises(xs.UnknownDeviceError, match="only the TPU"):
        xs.topology("v5e:1x1", platform="cuda")


def test_a_built_program_compiles_for_a_tpu_without_one() -> None:
    m, k, n = 128, 256, 128
    exe = xs.compile(_matmul(m, k, n), device=xs.topology("v5e:1x1").devices[0])
    assert isinstance(exe, xs.CompileOnlyExecutable) and isinstance(exe, xs.Executable)
    assert exe.topology == "v5e:1x1" and exe.input_shapes == (xs.Shape.array_shape(np.float32, (m, k)),
                                                              xs.Shape.array_shape(np.float32, (k, n)))
    text = exe.hlo_text()
    assert "is_scheduled=true" in text and "{1,0:T(8,128)}" in text  # the TPU's tiled layouts
    assert exe.cost_analysis()["flops"] == 2 * m * k * n
    mem = exe.memory_stats()
    assert mem.argument_size_in_bytes == 4 * (m * k + k * n) and mem.output_size_in_bytes == 4 * m * n
    data = exe.serialize()
    assert data.startswith(b"XLASDK-EXECUTABLE\n") and len(data) > 10_000
    # it loads nowhere but on a TPU: on the CPU the platform check refuses it
    with pytest.raises(xs.FormatError, match="compiled for tpu"):
        xs.deserialize_executable(data, "cpu:0")


def test_a_compile_only_executable_refuses_to_run() -> None:
    exe = xs.compile(_matmul(), device=xs.topology("v5e:1x1").devices[0])
    a, w = np.ones((128, 256), np.float32), np.ones((256, 128), np.float32)
    for call in (lambda: exe(a, w), lambda: exe.execute(a, w), lambda: exe.execute_replicated([[a, w]])):
        with pytest.raises(xs.CompileOnlyError, match="compile-only devices of topology 'v5e:1x1'"):
            call()


def test_a_sharded_program_compiles_for_four_chips() -> None:
    topo = xs.topology("v5e:2x2")
    b = xs.XlaBuilder("ar")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (8, 128)), "x")
    ops.CrossReplicaSum(x)
    exe = xs.compile(b.build(), device=topo.devices[0], options=xs.CompileOptions(num_replicas=4))
    assert len(exe.devices) == 4 and "all-reduce" in exe.hlo_text()


@pytest.mark.parametrize("program", sorted(p.name for p in DUMPS.iterdir() if p.is_dir()))
def test_real_dumps_compile_for_v5e(program: str) -> None:
    """Every real dump compiles for a v5e through the API (in the worker first: loaded files), with
    the TPU's layouts, and serializes."""
    path = DUMPS / program / "module.before_optimizations.txt"
    comp = xs.load_computation(path)
    part = comp.partitioning()
    n = part.num_partitions if part is not None and part.num_partitions else 1
    topo = xs.topology("v5e:2x2" if n == 4 else "v5e:1x1")
    options = xs.CompileOptions(num_partitions=n) if n > 1 else None
    exe = xs.compile(comp, device=topo.devices[0], options=options)
    text = exe.hlo_text()
    assert ":T(" in text, text[:400]
    assert exe.cost_analysis().get("bytes accessed", 0) > 0
    assert len(exe.serialize()) > 1000


def test_a_loaded_program_that_aborts_the_tpu_compiler_is_an_error_not_a_dead_process() -> None:
    xla_faults.require(xla_faults.TPU_ABORTS[0], tpu=True)  # libtpu 0.0.52 no longer dies on it
    bad = xs.load_computation(ABORT_CASE)
    with pytest.raises(xs.CompileError, match=r"for v5e:1x1 failed: XLA aborted on this program .*SIGABRT"):
        xs.compile(bad, device=xs.topology("v5e:1x1").devices[0])
    assert isolated.worker_pid() != os.getpid()


def test_built_abort_case_would_kill_the_process() -> None:
    """The abort case is real: compiled in-process (as a built program is), XLA's TPU compiler ends
    the process; this is what the worker keeps away from the user's process."""
    xla_faults.require(xla_faults.TPU_ABORTS[0], tpu=True)
    code = (
        "import xlasdk as xs\n"
        "from xlasdk._jaxlib import tpu\n"
        "from xlasdk.runtime import _compile\n"
        f"c = xs.load_computation({str(ABORT_CASE)!r})\n"
        "t = xs.topology('v5e:1x1')\n"
        "tpu.compile_only(t.client._c, c.as_stablehlo_text(), [t.devices[0]._d], "
        "_compile.pjrt.make_compile_options(1, 1, None, ()), 'rw')\n"
        "print('survived')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == -6 and "survived" not in r.stdout, (r.returncode, r.stderr[-500:])


def test_cli_inspect_topology(tmp_path: Path) -> None:
    path = DUMPS / "convnet_train" / "module.before_optimizations.txt"
    env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={tmp_path / 'dump'}")
    r = subprocess.run([sys.executable, "-m", "xlasdk.cli", "inspect", str(path), "--topology", "v5e:1x1",
                        "--optimized"], capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert r.returncode == 0, r.stderr[-800:]
    assert "cost analysis (tpu[v5e:1x1]:0)" in r.stdout and "optimized HLO:" in r.stdout
    assert "{0:T(128)}" in r.stdout.split("optimized HLO:")[1]
    # XLA's dump files of the TPU compile, as XLA_FLAGS asked
    names = [p.name for p in (tmp_path / "dump").iterdir()]
    assert any("after_optimizations" in n for n in names), names
    r = subprocess.run([sys.executable, "-m", "xlasdk.cli", "inspect", str(path), "--topology", "v9z:1x1"],
                       capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 2 and "--topology" in r.stderr.splitlines()[-1], r.stderr[-500:]
    r = subprocess.run([sys.executable, "-m", "xlasdk.cli", "inspect", str(path), "--topology", "v5e:1x1",
                        "--device", "cpu:0"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 2 and "give one" in r.stderr, r.stderr[-500:]


def test_without_libtpu_the_error_says_how_to_get_it(tmp_path: Path) -> None:
    code = (
        "import xlasdk as xs\n"
        "try:\n    xs.topology('v5e:1x1')\n"
        "except xs.PluginError as e:\n    print('PluginError', e)\n"
    )
    env = dict(os.environ, TPU_LIBRARY_PATH=str(tmp_path / "nope.so"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert "PluginError" in r.stdout and "TPU_LIBRARY_PATH names no file" in r.stdout, (r.stdout, r.stderr[-300:])
    bad = tmp_path / "libtpu.so"
    bad.write_bytes(b"not a library")
    env["TPU_LIBRARY_PATH"] = str(bad)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert "PluginError" in r.stdout and "not a loadable shared library" in r.stdout, (r.stdout, r.stderr[-300:])
