"""Make XLA's TPU dumps of small JAX programs whose TPU-optimized modules hold XLA:TPU's custom calls
``Cholesky``, ``InvertDiagBlocksLowerTriangular`` / ``InvertDiagBlocksUpperTriangular`` and
``GatherScatterIndicesBitpacked``, without a TPU: each program is lowered by JAX (a test-only peer),
loaded with ``xs.XlaComputation.from_stablehlo`` and compiled for ``xs.topology("v5e:1x1")`` under XLA's
dump flags; the modules before and after optimizations are copied to
tests/data/dumps_tpu_custom_calls/<program>/ (tests/test_tpu_meaning_linalg.py reads them).

    python tools/make_tpu_custom_call_dumps.py [OUT]   # needs jax and libtpu (pip install 'xlasdk[tpu]' jax)

OUT (default tests/data/dumps_tpu_custom_calls): the folder the programs' folders go to (the tests read
dumps_tpu_custom_calls, made with jaxlib 0.10.2 / libtpu 0.0.42.1, and dumps_tpu_custom_calls_libtpu052,
made with jaxlib 0.12.1 / libtpu 0.0.52).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DST = ROOT / "tests" / "data" / "dumps_tpu_custom_calls"
KEEP = ("before_optimizations.txt", "after_optimizations.txt")

#: program name -> (python expression of the function, argument shapes): f32 unless named
PROGRAMS = {
    "cholesky": ("lambda a: jnp.linalg.cholesky(a)", [(8, 8)]),
    "cholesky_batch": ("lambda a: jnp.linalg.cholesky(a)", [(3, 5, 5)]),
    "cholesky_blocked": ("lambda a: jnp.linalg.cholesky(a)", [(300, 300)]),
    "cho_solve": ("lambda a, b: jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(a, lower=True), b)",
                  [(16, 16), (16, 4)]),
    "triangular_solve_blocked": ("lambda l, b: jax.scipy.linalg.solve_triangular(l, b, lower=True)",
                                 [(300, 300), (300, 4)]),
    "triangular_solve_upper": ("lambda u, b: jax.scipy.linalg.solve_triangular(u, b, lower=False)", [(8, 8), (8, 4)]),
    "triangular_solve_batch": ("lambda l, b: jax.scipy.linalg.solve_triangular(l, b, lower=True, trans=1)",
                               [(2, 16, 16), (2, 16, 3)]),
    "gather_2d": ("lambda x, i, j: x[i, j]", [(64, 128), ("int32", 32), ("int32", 32)]),
    "scatter_add_2d": ("lambda x, i, j, u: x.at[i, j].add(u)", [(64, 128), ("int32", 32), ("int32", 32), (32,)]),
    "take_along_axis": ("lambda x, i: jnp.take_along_axis(x, i, axis=1)", [(64, 128), ("int32", 64, 16)]),
}

CHILD = """
import sys
import numpy as np
import jax
import jax.numpy as jnp
jax.config.update("jax_platforms", "cpu")
import xlasdk as xs
f = eval(sys.argv[1])
args = [np.zeros(s[1:], s[0]) if isinstance(s[0], str) else np.zeros(s, np.float32) for s in eval(sys.argv[2])]
comp = xs.XlaComputation.from_stablehlo(jax.jit(f).lower(*args).as_text())
xs.compile(comp, device=xs.topology("v5e:1x1").devices[0])
"""


def main() -> None:
    dst = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else DST
    for program, (fn, shapes) in PROGRAMS.items():
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={tmp} --xla_dump_hlo_as_text")
            r = subprocess.run([sys.executable, "-c", CHILD, fn, repr(shapes)], env=env, capture_output=True,
                               text=True, cwd=ROOT)
            if r.returncode != 0:
                raise SystemExit(f"{program}: {r.stderr[-2000:]}")
            out = dst / program
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            for f in sorted(glob.glob(os.path.join(tmp, "module_*"))):
                kind = os.path.basename(f).split(".cl_", 1)[-1].split(".", 1)[-1]
                if kind in KEEP:
                    shutil.copy(f, out / f"module.{kind}")
            print(program, sorted(p.name for p in out.iterdir()))


if __name__ == "__main__":
    main()
