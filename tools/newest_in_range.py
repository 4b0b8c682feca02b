"""Check that an environment holds the newest release of a package that xlasdk's range admits.

    python tools/newest_in_range.py jaxlib         # the [project] dependency's range
    python tools/newest_in_range.py libtpu --extra tpu

Reads the requirement of PACKAGE from pyproject.toml (the dependency, or the extra's entry whose
marker holds for this Python), asks the package index which releases exist for this Python
(``pip index versions``), and exits 1 when the installed release is not the newest one the range
admits (pip was held back, or a cache served an old wheel), 0 when it is; it prints both. CI
(``.ci/run``) runs it after installing, so the suite runs on what ``pip install`` gives users today.
It needs the package index; without it, it says so and exits 2.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parents[1]


def requirement(package: str, extra: str | None) -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    entries = project["optional-dependencies"][extra] if extra else project["dependencies"]
    for entry in entries:
        req = Requirement(entry)
        if req.name == package and (req.marker is None or req.marker.evaluate()):
            return req
    raise SystemExit(f"newest_in_range: no requirement on {package} for this Python in pyproject.toml")


def released(package: str) -> list[Version]:
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    cmd = [sys.executable, "-m", "pip", "index", "versions", package, "--python-version", py, "--only-binary=:all:"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
    for line in proc.stdout.splitlines():
        if line.startswith("Available versions:"):
            out = []
            for v in line.split(":", 1)[1].split(","):
                try:
                    out.append(Version(v.strip()))
                except InvalidVersion:
                    continue
            return out
    print(f"newest_in_range: the package index did not answer for {package}: {proc.stderr.strip()[:300]}",
          file=sys.stderr)
    raise SystemExit(2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("package")
    ap.add_argument("--extra")
    args = ap.parse_args()
    req = requirement(args.package, args.extra)
    admitted = [v for v in released(args.package) if req.specifier.contains(v, prereleases=False)]
    if not admitted:
        print(f"newest_in_range: no release of {args.package} for this Python satisfies {req}", file=sys.stderr)
        return 1
    newest = max(admitted)
    installed = Version(importlib.metadata.version(args.package))
    print(f"{args.package}: installed {installed}, newest admitted by '{req.specifier}' {newest}")
    return 0 if installed == newest else 1


if __name__ == "__main__":
    sys.exit(main())
