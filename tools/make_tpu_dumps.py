"""Make XLA's TPU dumps of the real programs of tests/data/dumps/ without a TPU: each program's
before-optimizations file is compiled for a v5e (``xs.topology``, libtpu's compile-only client)
with XLA's dump flags, and the module's files are copied to tests/data/dumps_tpu/<program>/.

    python tools/make_tpu_dumps.py      # needs libtpu (pip install 'xlasdk[tpu]')

The inputs and JAX's outputs are those of tests/data/dumps/<program>/io.npz (the same program).
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
SRC = ROOT / "tests" / "data" / "dumps"
DST = ROOT / "tests" / "data" / "dumps_tpu"

KEEP = ("before_optimizations.txt", "before_optimizations.hlo.pb", "after_optimizations.txt",
        "after_optimizations.hlo.pb", "tpu_comp_env.txt")

CHILD = """
import sys
import xlasdk as xs
comp = xs.load_computation(sys.argv[1])
part = comp.partitioning()
n = part.num_partitions if part is not None and part.num_partitions else 1
topo = xs.topology("v5e:2x2" if n == 4 else "v5e:1x1")
xs.compile(comp, device=topo.devices[0], options=xs.CompileOptions(num_partitions=n) if n > 1 else None)
print(topo.name)
"""


def main() -> None:
    for program in sorted(p.name for p in SRC.iterdir() if p.is_dir()):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={tmp} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto")
            r = subprocess.run([sys.executable, "-c", CHILD, str(SRC / program / "module.before_optimizations.txt")],
                               env=env, capture_output=True, text=True, cwd=ROOT)
            if r.returncode != 0:
                raise SystemExit(f"{program}: {r.stderr[-2000:]}")
            out = DST / program
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            for f in sorted(glob.glob(os.path.join(tmp, "module_*"))):
                # module_NNNN.<name>.cl_NNN.<kind>: keep the modules before and after optimizations
                # (text and proto) and the TPU compile environment, named module.<kind>
                kind = os.path.basename(f).split(".cl_", 1)[-1].split(".", 1)[-1]
                if kind in KEEP:
                    shutil.copy(f, out / f"module.{kind}")
            print(program, r.stdout.strip(), sorted(p.name for p in out.iterdir()))


if __name__ == "__main__":
    main()
