"""One client per platform per process, shared with JAX in either order, arrays crossing without
copies (jax is a test-only peer; each case runs in a fresh process, since sharing is per process).
On a TPU machine the same scripts ran on the chip (tools/tpu_check.sh, CHANGELOG)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
REPO = Path(__file__).resolve().parents[2]

PROGRAM = """
import numpy as np
import xlasdk as xs
from xlasdk import ops
b = xs.XlaBuilder("sq")
x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (4,)), "x")
ops.Mul(x, x)
comp = b.build()
"""

CHECKS = """
import jax.numpy as jnp
dev = xs.default_device()
assert jax.devices()[0].client is dev.client._c, "two clients"
j = jnp.arange(4, dtype=jnp.float32)
d = xs.device_put(j)
assert d.unsafe_buffer_pointer() == j.unsafe_buffer_pointer(), "device_put copied"
assert xs.device_put(j, force_copy=True).unsafe_buffer_pointer() != j.unsafe_buffer_pointer()
exe = xs.compile(comp)
out = exe(j)  # a jax.Array argument, taken as it is
assert out.to_numpy().tolist() == [0.0, 1.0, 4.0, 9.0]
jo = out.to_jax()
assert jo.unsafe_buffer_pointer() == out.unsafe_buffer_pointer(), "to_jax copied"
assert jax.jit(lambda a: a + 1)(jo).tolist() == [1.0, 2.0, 5.0, 10.0]
assert (jo * 2).tolist() == [0.0, 2.0, 8.0, 18.0]
print("OK")
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XLASDK_PLATFORMS", "JAX_PLATFORMS")}
    env["JAX_PLATFORMS"] = "cpu"  # (JAX would otherwise try libtpu where it is installed)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=REPO,
                          env=env)


def test_jax_first_xlasdk_adopts_its_client() -> None:
    r = _run("import jax\njax.devices()\n" + PROGRAM + CHECKS)
    assert r.stdout.strip() == "OK", r.stderr[-1500:]


def test_xlasdk_first_share_with_jax_hands_jax_our_client() -> None:
    r = _run(PROGRAM + "c = xs.share_with_jax()\nimport jax\nassert c is xs.client()\n" + CHECKS)
    assert r.stdout.strip() == "OK", r.stderr[-1500:]


def test_to_jax_right_after_share_with_jax_is_jaxs_first_use() -> None:
    """Issue 47: ``to_jax()`` as JAX's first use after ``xs.share_with_jax()`` was refused (JAX had not
    made its clients yet), with a message telling the user to call share_with_jax() first. It starts
    JAX's clients from the factory share_with_jax registered, and hands the array over uncopied."""
    r = _run(PROGRAM + (
        "c = xs.share_with_jax()\n"
        "d = xs.compile(comp)(np.arange(4, dtype=np.float32))\n"
        "import sys\n"
        "xb = sys.modules.get('jax._src.xla_bridge')\n"
        "assert xb is None or not xb._backends, 'JAX started before to_jax'\n"
        "j = d.to_jax()\n"
        "import jax\n"
        "assert jax.devices()[0].client is c._c, 'two clients'\n"
        "assert j.unsafe_buffer_pointer() == d.unsafe_buffer_pointer(), 'to_jax copied'\n"
        "assert jax.jit(lambda a: a + 1)(j).tolist() == [1.0, 2.0, 5.0, 10.0]\n"
        "print('OK')\n"
    ))
    assert r.stdout.strip() == "OK", (r.stdout, r.stderr[-1500:])


def test_to_jax_before_any_sharing_says_to_share_and_starts_nothing() -> None:
    """Without share_with_jax() and before JAX's first use, to_jax() is refused (sharing is still
    possible: the message says how) and JAX is not started by it."""
    r = _run(PROGRAM + (
        "d = xs.device_put(np.ones(3, np.float32))\n"
        "try:\n    d.to_jax()\nexcept xs.XlaSdkError as e:\n    print('refused:', e)\n"
        "import sys\n"
        "xb = sys.modules.get('jax._src.xla_bridge')\n"
        "print('started:', bool(xb is not None and xb._backends))\n"
    ))
    lines = r.stdout.splitlines()
    assert len(lines) == 2, (r.stdout, r.stderr[-1500:])
    assert lines[0].startswith("refused: to_jax: cpu:0 belongs to a client JAX does not use; call xs.share_with_jax()")
    assert lines[1] == "started: False"


def test_without_sharing_jax_works_and_to_jax_says_why_it_cannot() -> None:
    r = _run(PROGRAM + (
        "d = xs.device_put(np.ones(3, np.float32))\n"
        "import jax, jax.numpy as jnp\n"
        "assert (jnp.ones(3) + 1).tolist() == [2.0, 2.0, 2.0]\n"  # JAX's own client works beside ours
        "try:\n    d.to_jax()\nexcept xs.XlaSdkError as e:\n    print('refused:', e)\n"
        "try:\n    xs.share_with_jax()\nexcept xs.XlaSdkError as e:\n    print('late:', e)\n"
        "j = jnp.arange(3, dtype=jnp.float32)\n"
        "print('copied:', xs.device_put(j).to_numpy().tolist())\n"  # another client: through the host
    ))
    lines = r.stdout.splitlines()
    assert len(lines) == 3, (r.stdout, r.stderr[-1500:])
    assert lines[0].startswith("refused: to_jax: cpu:0 belongs to a client JAX does not use; call xs.share_with_jax()")
    assert lines[1].startswith("late: share_with_jax: JAX has already made its 'cpu' client")
    assert lines[2] == "copied: [0.0, 1.0, 2.0]"


def test_a_deleted_jax_array_is_not_adopted() -> None:
    r = _run("import jax\njax.devices()\n" + PROGRAM + (
        "import jax.numpy as jnp\n"
        "j = jnp.arange(4, dtype=jnp.float32)\nj.delete()\n"
        "try:\n    xs.device_put(j)\nexcept xs.XlaRuntimeError as e:\n    print('refused:', e)\n"
    ))
    assert r.stdout.startswith("refused: device_put:") and "deleted" in r.stdout, (r.stdout, r.stderr[-800:])
