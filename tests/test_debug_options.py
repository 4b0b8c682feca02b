"""The ``debug_options`` file of an XLA dump (issue 45): read strictly, and a dump compiled with an
option that changes its values (``--xla_cpu_enable_fast_math=true``) replays with it bit for bit
(fresh dumps made by JAX, a test-only peer, in a child process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from xlasdk.formats.debug_options import debug_options_path, dump_debug_options, read_debug_options

_MAKE = textwrap.dedent("""
    import sys, numpy as np, jax, jax.numpy as jnp
    def f(x, y):
        return x / y, jnp.exp(x) * jnp.log(y)
    x = np.linspace(-3, 3, 1000).astype(np.float32)
    y = np.linspace(0.1, 7, 1000).astype(np.float32)
    np.savez(sys.argv[1], *[np.asarray(o) for o in jax.jit(f)(x, y)])
""")


def _dump(tmp_path: Path, flags: str) -> tuple[Path, list[np.ndarray]]:
    pytest.importorskip("jax")
    out = tmp_path / "jax_out.npz"
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={tmp_path / 'dump'} {flags}", "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", _MAKE, str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (path,) = (tmp_path / "dump").glob("module_*.jit_f.before_optimizations.txt")
    with np.load(out) as z:
        return path, [z[k] for k in z.files]


def test_a_dump_replays_with_the_options_it_was_compiled_with(tmp_path: Path) -> None:
    path, want = _dump(tmp_path, "--xla_cpu_enable_fast_math=true")
    opts = dump_debug_options(path)
    assert opts.get("xla_cpu_enable_fast_math") is True
    assert not any(k.startswith("xla_dump") for k in opts)  # where the dump went is not replayed
    x = np.linspace(-3, 3, 1000).astype(np.float32)
    y = np.linspace(0.1, 7, 1000).astype(np.float32)
    comp = xs.load_computation(path)
    replay = xs.compile(comp, options=xs.CompileOptions(env_option_overrides=opts))(x, y)
    for got, w in zip(replay, want, strict=True):
        np.testing.assert_array_equal(got.to_numpy(), w)
    plain = [o.to_numpy() for o in xs.compile(comp)(x, y)]
    if all(np.array_equal(p, w) for p, w in zip(plain, want, strict=True)):
        pytest.skip(f"fast math changes no value of this program on jaxlib {xs.jaxlib_version_info().release}")


def test_a_file_without_a_debug_options_beside_it_has_none(tmp_path: Path) -> None:
    path = tmp_path / "module_0001.jit_g.before_optimizations.txt"
    path.write_text("HloModule m\n")
    assert debug_options_path(path) is None and dump_debug_options(path) == {}
    assert debug_options_path(tmp_path / "model.hlo") is None


def test_the_file_is_read_strictly(tmp_path: Path) -> None:
    dump = tmp_path / "module_0003.jit_h.cpu_after_optimizations.txt"
    dump.write_text("HloModule m\n")
    opts = tmp_path / "module_0003.jit_h.debug_options"
    opts.write_text('xla_cpu_enable_fast_math: true\nxla_disable_hlo_passes: "a"\nxla_disable_hlo_passes: "b"\n'
                    'xla_gpu_autotune_level: 4\nxla_step_marker_location: STEP_MARK_AT_ENTRY\n'
                    'xla_dump_to: "/tmp/x"\nxla_detailed_logging: false\n')
    assert read_debug_options(opts)["xla_disable_hlo_passes"] == ["a", "b"]
    assert dump_debug_options(dump) == {"xla_cpu_enable_fast_math": True, "xla_disable_hlo_passes": "a,b",
                                        "xla_gpu_autotune_level": 4,
                                        "xla_step_marker_location": "STEP_MARK_AT_ENTRY"}
    opts.write_text('xla_cpu_enable_fast_math: true\nxla_backend_extra_options {\n  key: "k"\n}\n')
    with pytest.raises(xs.FormatError, match=r"debug_options:2: expected 'xla_NAME: VALUE'.*maps\) cannot be"):
        dump_debug_options(dump)
    opts.write_bytes(b"xla_cpu_enable_fast_math: \xff\n")
    with pytest.raises(xs.FormatError, match="UTF-8"):
        dump_debug_options(dump)


def test_run_applies_and_names_the_dumps_options(tmp_path: Path) -> None:
    """``xlasdk run DUMP_FILE --expect`` replays with the dump's options and names them; with
    ``--no-debug-options`` it compiles without them."""
    path, want = _dump(tmp_path, "--xla_cpu_enable_fast_math=true")
    np.savez(tmp_path / "inputs.npz", **{"0": np.linspace(-3, 3, 1000).astype(np.float32),
                                          "1": np.linspace(0.1, 7, 1000).astype(np.float32)})
    np.savez(tmp_path / "want.npz", **{f"output_{i}": w for i, w in enumerate(want)})

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "xlasdk.cli", "run", str(path), "--inputs",
                               str(tmp_path / "inputs.npz"), "--expect", str(tmp_path / "want.npz"), *extra],
                              capture_output=True, text=True, timeout=300)

    r = run()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "XLA options of the dump (" in r.stdout and "--xla_cpu_enable_fast_math=true" in r.stdout
    r = run("--no-debug-options")
    assert "XLA options of the dump" not in r.stdout
    assert r.returncode in (0, 1), r.stdout + r.stderr  # 1 where fast math changed a value (jaxlib 0.12.1: it does)


def test_compare_applies_and_names_the_dumps_options(tmp_path: Path) -> None:
    """``xlasdk compare DUMP_FILE`` compiles the device side with the dump's options, names them in
    its report and its JSON; ``--no-debug-options`` leaves them out."""
    import json

    path, _ = _dump(tmp_path, "--xla_cpu_enable_fast_math=true")
    np.savez(tmp_path / "inputs.npz", **{"0": np.linspace(-3, 3, 1000).astype(np.float32),
                                          "1": np.linspace(0.1, 7, 1000).astype(np.float32)})

    def compare(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "xlasdk.cli", "compare", str(path), "--inputs",
                               str(tmp_path / "inputs.npz"), "--json", str(tmp_path / "r.json"), *extra],
                              capture_output=True, text=True, timeout=300)

    r = compare()
    assert r.returncode == 0, r.stdout + r.stderr  # fast math's exp and log are within the f32 tolerances
    assert "XLA options of the dump (" in r.stdout and "--xla_cpu_enable_fast_math=true" in r.stdout
    assert json.loads((tmp_path / "r.json").read_text())["dump_debug_options"]["xla_cpu_enable_fast_math"] is True
    r = compare("--no-debug-options")
    assert r.returncode == 0 and "XLA options of the dump" not in r.stdout, r.stdout + r.stderr
    assert "dump_debug_options" not in json.loads((tmp_path / "r.json").read_text())
