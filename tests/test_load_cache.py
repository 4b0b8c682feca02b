"""The verified-load cache (xlasdk.program.load_cache, issue 21): the same bytes are verified once.

Each test counts the loader's requests to the worker process, and checks what a cached load
gives against numpy on the module's own arithmetic, not against another xlasdk load."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk._jaxlib import isolated
from xlasdk.program import load_cache

_HLO = """HloModule cached_{tag}

ENTRY main {{
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  m = f32[4] multiply(x, y)
  ROOT r = f32[4] add(m, x)
}}
"""
_MLIR = """func.func @main(%x: tensor<3xi32>) -> tensor<3xi32> {{
  %c = stablehlo.constant dense<{k}> : tensor<3xi32>
  %r = stablehlo.subtract %x, %c : tensor<3xi32>
  return %r : tensor<3xi32>
}}
"""


@pytest.fixture
def worker_loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the worker functions the loaders ask for, in order (requests still run)."""
    monkeypatch.delenv("XLASDK_CACHE_DIR", raising=False)
    monkeypatch.delenv("XLASDK_LOAD_CACHE", raising=False)
    load_cache.clear()
    seen: list[str] = []
    real = isolated.request

    def counting(target: str, *args: Any, timeout: float | None = None, **how: Any) -> Any:
        if target.startswith(("xlasdk.formats.untrusted:", "xlasdk.program._worker:")):
            seen.append(target.rpartition(":")[2])
        return real(target, *args, timeout=timeout, **how)  # on_death: the CLI's child runs it in-process

    monkeypatch.setattr(isolated, "request", counting)
    yield seen
    load_cache.clear()


def _check_hlo(comp: xs.XlaComputation) -> None:
    x = np.array([1.5, -2.0, 0.25, 8.0], np.float32)
    y = np.array([3.0, 0.5, -4.0, 0.125], np.float32)
    np.testing.assert_array_equal(xs.compile(comp)(x, y).to_numpy(), x * y + x)


def test_the_same_hlo_bytes_are_verified_once(tmp_path: Path, worker_loads: list[str]) -> None:
    path = tmp_path / "m.hlo"
    path.write_text(_HLO.format(tag="a"))
    first = xs.load_computation(path)
    again = xs.load_computation(path)
    assert worker_loads == ["load_hlo_in_worker"]  # the second load asked the worker nothing
    assert again.as_stablehlo_text() == first.as_stablehlo_text()  # parsed here from the verified bytecode
    assert again.program_shape() == first.program_shape()
    assert worker_loads == ["load_hlo_in_worker"]
    _check_hlo(again)  # compiling needs the module's text: printed by the worker, once for these bytes
    _check_hlo(first)
    assert worker_loads == ["load_hlo_in_worker", "module_text_in_worker"]
    # XLA's proto reader (for the HLO printer) runs in the worker first, once for these bytes
    assert "ROOT %r = f32[4]{0} add(%m, %x)" in first.as_hlo_text()
    assert again.as_hlo_text() == first.as_hlo_text()
    assert worker_loads == ["load_hlo_in_worker", "module_text_in_worker", "hlo_proto_in_worker"]
    # other bytes are another module: a one-character change is loaded (and verified) again
    other = tmp_path / "n.hlo"
    other.write_text(_HLO.format(tag="a").replace("add(m, x)", "add(m, y)"))
    xs.load_computation(other)
    assert worker_loads == ["load_hlo_in_worker", "module_text_in_worker", "hlo_proto_in_worker",
                            "load_hlo_in_worker"]


def test_the_same_stablehlo_bytes_are_parsed_once(worker_loads: list[str]) -> None:
    text = _MLIR.format(k=7)
    a = xs.XlaComputation.from_stablehlo(text)
    b = xs.XlaComputation.from_stablehlo(text)
    assert worker_loads == ["parse_stablehlo_in_worker"]
    x = np.array([10, -3, 7], np.int32)
    np.testing.assert_array_equal(xs.compile(b)(x).to_numpy(), x - 7)
    assert a.as_stablehlo_text() == b.as_stablehlo_text()


def test_a_failed_load_is_not_remembered(tmp_path: Path, worker_loads: list[str]) -> None:
    bad = tmp_path / "bad.hlo"
    bad.write_text(_HLO.format(tag="b").replace("f32[4] add(m, x)", "f32[5] add(m, x)"))
    for _ in range(2):
        with pytest.raises(xs.FormatError, match=r"bad\.hlo: the module is inconsistent: line 7: instruction 'r'"):
            xs.load_computation(bad)
    assert worker_loads.count("load_hlo_in_worker") == 2  # each failure came from the worker again


def test_off_with_the_environment_variable(monkeypatch: pytest.MonkeyPatch, worker_loads: list[str]) -> None:
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    for _ in range(2):
        xs.XlaComputation.from_hlo_text(_HLO.format(tag="c"))
    assert worker_loads == ["load_hlo_in_worker", "load_hlo_in_worker"]


_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import xlasdk as xs
    from xlasdk._jaxlib import isolated
    seen = []
    real = isolated.request
    def counting(target, *args, timeout=None, **how):
        if target.startswith(("xlasdk.formats.untrusted:", "xlasdk.program._worker:")):
            seen.append(target.rpartition(":")[2])
        return real(target, *args, timeout=timeout, **how)
    isolated.request = counting
    comp = xs.load_computation(sys.argv[1])
    x = np.array([1.5, -2.0, 0.25, 8.0], np.float32)
    y = np.array([3.0, 0.5, -4.0, 0.125], np.float32)
    ok = bool(np.array_equal(xs.compile(comp)(x, y).to_numpy(), x * y + x))
    print(ok, ",".join(seen))
""")


def _child(path: Path, cache: Path) -> tuple[str, str]:
    env = {**os.environ, "XLASDK_CACHE_DIR": str(cache)}
    env.pop("XLASDK_LOAD_CACHE", None)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env,
                         timeout=120, check=True)
    ok, _, asked = out.stdout.strip().rpartition("\n")[2].partition(" ")
    return ok, asked


def test_on_disk_beside_the_compile_cache_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "m.hlo"
    path.write_text(_HLO.format(tag="d"))
    cache = tmp_path / "cache"
    # the load, then the module's text for the compile: both printed by the worker, both kept
    assert _child(path, cache) == ("True", "load_hlo_in_worker,module_text_in_worker")
    entries = list((cache / "loads").glob("*.xlaexe"))
    assert len(entries) == 2
    assert _child(path, cache) == ("True", "")  # a fresh process: verified before, on disk
    # a damaged entry fails its checksum: it is dropped and the file verified again, right
    for entry in entries:
        raw = bytearray(entry.read_bytes())
        raw[-5] ^= 0x40
        entry.write_bytes(bytes(raw))
    assert _child(path, cache) == ("True", "load_hlo_in_worker,module_text_in_worker")


def test_a_record_naming_anything_but_shapes_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        worker_loads: list[str]) -> None:
    """An entry with a valid checksum whose record names another class (``os.system``, say) is
    not built: it is deleted and the module loaded through the worker."""
    import pickle

    monkeypatch.setenv("XLASDK_CACHE_DIR", str(tmp_path / "cache"))
    text = _HLO.format(tag="e")
    k = load_cache.key("load_hlo_in_worker", "text", text)
    store = load_cache._disk()
    assert store is not None
    store.put(k, pickle.dumps((os.system, ("true",))), name="evil")
    comp = xs.XlaComputation.from_hlo_text(text)
    assert worker_loads == ["load_hlo_in_worker"]
    _check_hlo(comp)
    assert store.get(k) is not None and b"posix" not in store.get(k)  # replaced by the real record
