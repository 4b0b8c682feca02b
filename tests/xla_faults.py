"""The XLA faults the suite needs, found on the installed jaxlib and libtpu at run time (issue 41).

A test that shows xlasdk containing an XLA abort (the worker dies, the user's process does not)
needs an XLA that still aborts on something. Releases fix what the suite used: XLA:CPU of jaxlib
0.11 stopped dying on a constant division by zero, jaxlib 0.12.1 on a reduce-window with negative
padding, libtpu 0.0.52 on the same reduce-window. Such a test asks this module for its case:

- :func:`still_aborts` runs one case through ``xs.compile`` (in xlasdk's worker: the abort cannot
  take pytest) and says whether this XLA still dies on it (cached for the session);
- :func:`require` skips the test, naming the release, where this XLA no longer dies on it;
- :func:`cpu_abort` gives the first case of :data:`CPU_ABORTS` this XLA:CPU still dies on (a test
  of the *mechanism* runs on every release that has any), or skips naming each case it tried.

:data:`KNOWN` records what each release was seen to do, for the reader; the probe decides. A test
never fails because XLA got better; ``tests/test_xla_faults.py`` checks that a probe tells a dying
case from a healthy one, so a broken probe cannot skip everything silently.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

import xlasdk as xs

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Abort:
    """An HLO module that XLA's compiler has died on: ``text``, what kills it, and the releases
    seen dying (``"jaxlib 0.10.2"``, ``"libtpu 0.0.50.1"``...) and seen not (for the reader)."""

    name: str
    text: str
    what: str
    dies_on: tuple[str, ...] = ()
    fixed_in: tuple[str, ...] = ()


def _hlo(body: str, params: str, result: str, extra: str = "") -> str:
    return f"HloModule case\n\n{extra}ENTRY main {{\n{params}{body}}}\n".replace("RESULT", result)


_ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n"

#: XLA:CPU compile aborts, most useful first (one that dies on the most releases).
CPU_ABORTS: list[Abort] = [
    Abort("reduce-window-negative-padding", (REPO / "tools" / "tpu_abort_case.hlo").read_text(),
          "the algebraic simplifier's RET_CHECK ShapeUtil::Compatible on a reduce-window padded -1 (cases.md C-06)",
          dies_on=("jaxlib 0.10.2", "jaxlib 0.12.0.1"), fixed_in=("jaxlib 0.12.1",)),
    Abort("constant-division-by-zero",
          _hlo("  ROOT bad = s32[] divide(c7, c0)\n", "  c7 = s32[] constant(7)\n  c0 = s32[] constant(0)\n", ""),
          "SIGFPE folding the constant s32 division 7 / 0 (cases.md C-03)",
          dies_on=("jaxlib 0.10.2",), fixed_in=("jaxlib 0.11.2", "jaxlib 0.12.0.1", "jaxlib 0.12.1")),
]

#: XLA:TPU compile aborts (compiled for ``xs.topology("v5e:1x1")``, no chip needed).
TPU_ABORTS: list[Abort] = [
    Abort("reduce-window-negative-padding", (REPO / "tools" / "tpu_abort_case.hlo").read_text(),
          "SIGABRT in the TPU compiler on a reduce-window padded -1",
          dies_on=("libtpu 0.0.42.1", "libtpu 0.0.50.1"), fixed_in=("libtpu 0.0.52",)),
]

#: What each release was seen to do with each case, by case name (the probe decides, not this).
KNOWN: dict[str, dict[str, bool]] = {
    a.name: {**dict.fromkeys(a.dies_on, True), **dict.fromkeys(a.fixed_in, False)} for a in CPU_ABORTS + TPU_ABORTS
}


def release() -> str:
    """``jaxlib X`` (and ``libtpu Y`` where installed), as the skip reasons name them."""
    import importlib.metadata

    out = f"jaxlib {xs.jaxlib_version_info().release}"
    try:
        out += f", libtpu {importlib.metadata.version('libtpu')}"
    except importlib.metadata.PackageNotFoundError:
        pass
    return out


@functools.cache
def _death(text: str, tpu: bool) -> str | None:
    """XLA's death when compiling ``text`` (for a v5e without a chip when ``tpu``), else None."""
    try:
        comp = xs.XlaComputation.from_hlo_text(text)
        device = xs.topology("v5e:1x1").devices[0] if tpu else "cpu:0"
        xs.compile(comp, device=device)
    except (xs.CompileError, xs.FormatError) as e:
        return str(e) if "XLA aborted" in str(e) else None
    return None


def still_aborts(case: Abort, *, tpu: bool = False) -> str | None:
    """XLA's death message where the installed XLA (libtpu when ``tpu``) still dies compiling
    ``case``, else None."""
    return _death(case.text, tpu)


def require(case: Abort, *, tpu: bool = False) -> str:
    """``case``'s death message, or a skip naming the release that no longer dies on it."""
    died = still_aborts(case, tpu=tpu)
    if died is None:
        pytest.skip(f"XLA of {release()} no longer dies on {case.name} ({case.what})")
    return died


def cpu_abort() -> Abort:
    """The first of :data:`CPU_ABORTS` this XLA:CPU still dies on, or a skip naming them all."""
    for case in CPU_ABORTS:
        if still_aborts(case) is not None:
            return case
    pytest.skip(f"XLA:CPU of {release()} dies on none of the known abort cases "
                f"({', '.join(c.name for c in CPU_ABORTS)})")
