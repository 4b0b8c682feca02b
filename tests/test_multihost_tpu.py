"""Multi-host TPU as JAX does it, tested without a chip: the TPU client of a job gets the distributed
runtime client (``xs.distributed.initialize`` first), the order is enforced, and ``xs.topology``'s
compile for a whole slice gives each host (process index) its part. libtpu is a test-only peer: the
tests that need it skip without it. What needs a pod is written down in xlasdk/launch.py."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="libtpu is not installed")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLASDK_", "JAX_"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _script(body: str, timeout: float = 240) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    """Run ``body`` in a fresh interpreter; its last stdout line is a JSON report."""
    prelude = textwrap.dedent("""
        import json, socket, sys
        import xlasdk as xs
        from xlasdk._jaxlib import pjrt

        def free_port():
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                return s.getsockname()[1]
    """)
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(body)], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT, env=_env())
    lines = [x for x in r.stdout.splitlines() if x.startswith("{")]
    return r, (json.loads(lines[-1]) if lines else {})


def _lived(r: subprocess.CompletedProcess[str]) -> None:
    """The process ended by itself with 0 (not by a signal: XLA's aborts are SIGABRT)."""
    assert r.returncode == 0, (r.returncode, r.stderr[-1500:])


# -- the TPU client of a job ---------------------------------------------------------------------------
@needs_libtpu
def test_the_tpu_client_of_a_job_gets_the_distributed_client_and_no_node_options() -> None:
    """Under ``xs.distributed.initialize`` the TPU plugin's client is made with the job's distributed
    runtime client (the very object the job holds), as JAX's ``make_tpu_client``; libtpu itself
    judges the options: it refuses ``node_id`` / ``num_nodes`` (which xlasdk passed before: the
    client of a pod then failed with INVALID_ARGUMENT) before it looks for a chip, so on this
    chipless machine the error must be the missing chip, and the process lives."""
    r, out = _script("""
        seen = []
        real = pjrt.make_plugin_client

        def observed(name, options, distributed_client=None):
            seen.append((name, dict(options or {}), distributed_client))
            return real(name, options, distributed_client)

        pjrt.make_plugin_client = observed
        xs.distributed.initialize(f"127.0.0.1:{free_port()}", 1, 0, join_timeout=60)
        dc = xs.distributed._state.dc
        try:
            xs.devices("tpu")
            error = None
        except xs.XlaSdkError as e:
            error = [type(e).__name__, str(e)]
        xs.distributed.shutdown()
        print(json.dumps({"error": error, "calls": [[n, sorted(o), c is dc] for n, o, c in seen]}))
    """)
    _lived(r)
    assert out["calls"] == [["tpu", ["ml_framework_name", "ml_framework_version"], True]], out
    kind, message = out["error"]  # type: ignore[misc]
    assert kind == "PluginError" and "no TPU chip" in message and "Unexpected option" not in message, message


@needs_libtpu
def test_a_tpu_client_without_a_job_gets_no_distributed_client() -> None:
    r, out = _script("""
        seen = []
        real = pjrt.make_plugin_client

        def observed(name, options, distributed_client=None):
            seen.append(distributed_client is None)
            return real(name, options, distributed_client)

        pjrt.make_plugin_client = observed
        try:
            xs.devices("tpu")
        except xs.PluginError as e:
            print(json.dumps({"none": seen, "error": str(e)}))
    """)
    _lived(r)
    assert out["none"] == [True] and "no TPU chip" in str(out["error"]), out


@needs_libtpu
def test_initialize_after_the_tpu_client_exists_is_an_xlasdk_error() -> None:
    """The TPU client made first belongs to this host alone: initialize refuses, as JAX's does, and
    names the client. (No chip here: the plugin's client is stood in for by a CPU client, through
    xlasdk's own seam, after libtpu really loaded.)"""
    r, out = _script("""
        pjrt.make_plugin_client = lambda name, options, distributed_client=None: pjrt.make_cpu_client(1)
        assert xs.client("tpu").name == "tpu"
        try:
            xs.distributed.initialize(f"127.0.0.1:{free_port()}", 1, 0, join_timeout=60)
            error = None
        except xs.DistributedError as e:
            error = str(e)
        print(json.dumps({"error": error, "initialized": xs.distributed.is_initialized()}))
    """)
    _lived(r)
    assert out["initialized"] is False, out
    assert "before the first use of a TPU" in str(out["error"]) and "'tpu'" in str(out["error"]), out


def test_initialize_after_the_cpu_client_exists_is_fine() -> None:
    """The CPU client is the one initialize replaces: using it first is allowed (the README's examples)."""
    r, out = _script("""
        xs.devices()
        xs.distributed.initialize(f"127.0.0.1:{free_port()}", 1, 0, join_timeout=60)
        n = len(xs.devices())
        xs.distributed.shutdown()
        print(json.dumps({"devices": n}))
    """)
    _lived(r)
    assert out == {"devices": 1}
