"""The ``proxy`` platform (jaxlib's IFRT Proxy client, Pathways) without a server: clear xlasdk errors
naming the platform and what to set, the process lives (each case runs in a fresh interpreter and must
end with exit status 0 or the CLI's 1, never a signal), the connection is tried in the worker first, and
a device behind the proxy is judged by its device kind (a TPU as a TPU)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from xlasdk.reference._precision import DEVICE_KINDS, device_kind_of
from xlasdk.runtime.accelerators import model_platform

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "tests" / "data" / "dumps" / "int_indexing" / "module.before_optimizations.txt"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLASDK_", "JAX_"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _run(body: str, **env: str) -> tuple[int, dict[str, object], str]:
    code = "import json, os\nimport xlasdk as xs\n" + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=ROOT,
                       env=_env(**env))
    lines = [x for x in r.stdout.splitlines() if x.startswith("{")]
    return r.returncode, (json.loads(lines[-1]) if lines else {}), r.stderr


_ASK = """
    try:
        xs.devices("proxy")
        error = None
    except xs.XlaSdkError as e:
        error = [type(e).__name__, str(e)]
    print(json.dumps({"error": error}))
"""


def test_no_server_address_names_the_platform_and_the_variable() -> None:
    rc, out, err = _run(_ASK)
    assert rc == 0, (rc, err[-800:])
    kind, message = out["error"]  # type: ignore[misc]
    assert kind == "PluginError" and "'proxy'" in message and "XLASDK_BACKEND_TARGET" in message, message
    assert "JAX_BACKEND_TARGET" in message and "grpc://HOST:PORT" in message


@pytest.mark.parametrize("address", ["localhost:29000", "http://localhost:29000", "grpc:/x"])
def test_an_address_without_a_known_transport_is_refused_before_connecting(address: str) -> None:
    rc, out, err = _run(_ASK, JAX_BACKEND_TARGET=address)
    assert rc == 0, (rc, err[-800:])
    kind, message = out["error"]  # type: ignore[misc]
    assert kind == "PluginError" and f"JAX_BACKEND_TARGET={address!r}" in message and "grpc" in message, message


def test_a_server_that_is_not_there_is_an_error_and_the_process_lives() -> None:
    """Nothing listens at the address: the worker's connection fails after XLASDK_PROXY_TIMEOUT, this
    process never tried (it connects only after the worker did: observed through xlasdk's seam), and
    it ends normally (a Python connection callback would have aborted it at exit)."""
    port = _free_port()
    rc, out, err = _run("""
        from xlasdk._jaxlib import isolated, proxy
        here = []
        real = proxy.connect
        proxy.connect = lambda address, seconds: (here.append(address), real(address, seconds))[1]
        try:
            xs.devices("proxy")
            error = None
        except xs.PluginError as e:
            error = str(e)
        print(json.dumps({"error": error, "here": here, "worker": isolated.worker_pid() not in (None, os.getpid())}))
    """, XLASDK_BACKEND_TARGET=f"grpc://127.0.0.1:{port}", XLASDK_PROXY_TIMEOUT="2")
    assert rc == 0, (rc, err[-800:])
    message = str(out["error"])
    assert f"cannot connect to the IFRT proxy server grpc://127.0.0.1:{port} (XLASDK_BACKEND_TARGET) within 2 s" \
        in message and "XLASDK_PROXY_TIMEOUT" in message, message
    assert out["here"] == [] and out["worker"] is True, out


def test_connecting_in_this_process_sets_no_callback_so_the_process_ends_normally() -> None:
    """xlasdk's own connection (no Python callback) to an absent server raises and the interpreter exits
    0; with jaxlib's callbacks set, the same process dies at exit (0.10.2 SIGABRT, 0.12.1 SIGSEGV)."""
    port = _free_port()
    rc, out, err = _run(f"""
        from xlasdk._jaxlib import proxy
        try:
            proxy.connect("grpc://127.0.0.1:{port}", 1)
            error = None
        except xs.PluginError as e:
            error = str(e)
        print(json.dumps({{"error": error}}))
    """)
    assert rc == 0, (rc, err[-800:])
    assert "Unable to establish connection" in str(out["error"]), out


def test_the_proxy_as_the_default_platform_is_its_error_never_the_cpu() -> None:
    rc, out, err = _run("""
        try:
            xs.devices()
            error = None
        except xs.XlaSdkError as e:
            error = str(e)
        print(json.dumps({"error": error}))
    """, XLASDK_PLATFORMS="proxy")
    assert rc == 0, (rc, err[-800:])
    assert "platform 'proxy'" in str(out["error"]) and "XLASDK_BACKEND_TARGET" in str(out["error"]), out


def test_cli_device_proxy_without_a_server() -> None:
    r = subprocess.run([sys.executable, "-m", "xlasdk.cli", "run", str(PROGRAM), "--device", "proxy:0",
                        "--random-inputs"], capture_output=True, text=True, timeout=180, cwd=ROOT, env=_env())
    assert r.returncode == 1, (r.returncode, r.stderr[-800:])
    last = r.stderr.strip().splitlines()[-1]
    assert "platform 'proxy'" in last and "XLASDK_BACKEND_TARGET" in last, last


# -- the precision model of a device behind the proxy -------------------------------------------------
@pytest.mark.parametrize(("platform", "kind", "want"), [
    ("proxy", "TPU v5 lite", "tpu-v5e"),
    ("proxy", "TPU v5e", "tpu-v5e"),
    ("proxy", "TPU v6 lite", "tpu-v6e"),
    ("proxy", "TPU v5p", "tpu-v5p"),
    ("proxy", "TPU v5", "tpu-v5p"),
    ("proxy", "TPU v4", "tpu-v4"),
    ("proxy", "NVIDIA H100 80GB HBM3", "gpu"),
    ("proxy", "cpu", "cpu"),
    ("proxy", "", "cpu"),  # nothing said: the strictest model, never a TPU's looser bounds
    ("proxy", "a remote thing", "cpu"),
    ("tpu", "TPU v6 lite", "tpu-v6e"),
    ("cpu", "cpu", "cpu"),
    ("cuda", "NVIDIA A100-SXM4-40GB", "gpu"),
    ("METAL", "Apple M2", "cpu"),
])
def test_a_device_kind_behind_the_proxy_picks_its_model(platform: str, kind: str, want: str) -> None:
    device = SimpleNamespace(platform=platform, device_kind=kind)
    assert device_kind_of(device) is DEVICE_KINDS[want]  # type: ignore[arg-type]


def test_model_platform_reads_the_kind_only_for_unknown_platforms() -> None:
    assert model_platform("proxy", "TPU v5 lite") == "tpu"
    assert model_platform("cpu", "TPU v5 lite") == "cpu"  # a named platform is what it says
    assert model_platform("rocm", "AMD Instinct MI300X") == "gpu" == model_platform("proxy", "AMD Instinct MI300X")
