"""``bisect="passes"`` (:func:`bisect_passes`): the XLA passes whose disabling removes a divergence,
by delta debugging over the passes that change the module (see :mod:`xlasdk.reference.bisect`)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._numbers import tolerances
from ._settings import CompareSettings, refuse_both, resolve_device

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ..runtime import CompileOptions
    from ._settings import DeviceLike

__all__ = ["PassBisection", "bisect_passes", "pass_names"]


@dataclass
class PassBisection:
    """The result of ``bisect="passes"``.

    ``status``: ``"no divergence"``, ``"found"`` (disabling ``passes`` makes the outputs match, and
    no pass of the set can be left out), ``"not found"`` (disabling every candidate at once does not
    remove it, or makes the compile fail: ``unknown``). ``candidates``: the passes that changed the
    module in this compile (from XLA's per-pass dump), ``compiles``: how many compiles the search
    took, ``unknown``: sets whose disabling made the compile or the run fail (counted as not
    removing it).
    """

    status: str
    passes: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    compiles: int = 0
    unknown: list[list[str]] = field(default_factory=list)
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "passes": self.passes, "candidates": self.candidates,
                "compiles": self.compiles, "unknown": self.unknown, "note": self.note}

    def __str__(self) -> str:
        out = [f"bisect passes: {self.status}" + (f" ({self.compiles} compiles, {len(self.candidates)} candidate "
                                                  "passes)" if self.compiles else "")]
        if self.passes:
            out.append(f"  disabling {', '.join(self.passes)} removes the divergence "
                       f"(xla_disable_hlo_passes={','.join(self.passes)})")
        if self.unknown:
            out.append(f"  {len(self.unknown)} pass set(s) could not be tested (the compile or the run failed with "
                       "them disabled)")
        if self.note:
            out.append(f"  {self.note}")
        return "\n".join(out)


# -- passes ------------------------------------------------------------------------------------------------------
_PASS_FILE = re.compile(r"\.(\d{4})\.([^.]+)\.after_([^.]+)\.before_([^.]+)\.txt$")
_NOT_PASSES = frozenset({"pipeline-start", "pipeline-end"})


def pass_names(comp: XlaComputation, device: DeviceLike = None, options: CompileOptions | None = None) -> list[str]:
    """The HLO passes of XLA's compile of ``comp`` that change the module, in first-run order, as
    XLA names them (what ``xla_disable_hlo_passes`` takes), read from its per-pass dump file names
    (``...after_PASS.before_NEXT.txt``, written when PASS changed the module) in a temporary
    directory; pipelines (groups of passes) are left out."""
    from ..runtime import CompileOptions
    from ..runtime import compile as _compile

    d = tempfile.mkdtemp(prefix="xlasdk-passes-")
    try:
        env = [*_env(options), ("xla_dump_to", d), ("xla_dump_hlo_pass_re", ".*")]
        _compile(_isolated(comp), resolve_device(device), options=CompileOptions(env_option_overrides=env),
                 cache=False)
        order: list[tuple[int, str]] = []
        pipelines: set[str] = set()
        for f in os.listdir(d):
            m = _PASS_FILE.search(f)
            if m is None:
                continue
            step = int(m.group(1))
            pipelines.add(m.group(2))
            order.append((step, m.group(3)))  # the pass that changed the module (one that changes nothing is
            # never dumped after: disabling it cannot change the result)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    seen: dict[str, None] = {}
    for _, name in sorted(order):
        if name not in _NOT_PASSES and name not in pipelines:
            seen.setdefault(name)
    return list(seen)


def _env(options: CompileOptions | None) -> list[tuple[str, Any]]:
    return [] if options is None else list(options.env_option_overrides)


def _isolated(comp: XlaComputation) -> XlaComputation:
    """``comp`` as a computation that compiles in xlasdk's worker process (a disabled pass can make
    XLA abort): a built one is re-made through ``with_outputs``."""
    if comp.source_format is not None:
        return comp
    return comp.with_outputs(list(comp.instruction_graph().outputs))


def bisect_passes(comp: XlaComputation, args: Sequence[Any], want: Sequence[np.ndarray[Any, Any]],
                  scales: Sequence[Any], *, device: DeviceLike = None, options: CompileOptions | None = None,
                  rtol: float | None = None, atol: float | None = None, ulps: float | None = None,
                  max_compiles: int = 400, progress: Callable[[str], None] | None = None,
                  settings: CompareSettings | None = None) -> PassBisection:
    """A smallest set of XLA passes whose disabling makes ``comp``'s outputs on ``device`` match
    ``want`` (the reference outputs; ``scales`` their term scales, as :func:`xlasdk.compare` computes
    them). Each test is a compile in xlasdk's worker process with ``xla_disable_hlo_passes``; a set
    whose compile or run fails is unknown (never "fixes it"). At most ``max_compiles`` compiles.
    ``settings``: ``device``, the tolerances and ``progress`` as one :class:`~xlasdk.CompareSettings`
    (as :func:`xlasdk.compare` hands them on; ``options`` left out: its ``xla_flags``), else the
    keywords.

    Raises
    ------
    ToleranceError
        A tolerance that is not a finite number >= 0.
    CompareArgumentError
        ``settings`` given with one of the keywords it holds.
    """
    refuse_both("bisect_passes", settings, device=device, rtol=rtol, atol=atol, ulps=ulps, progress=progress)
    if settings is None:
        rtol, atol, ulps = tolerances("bisect_passes", rtol, atol, ulps)  # its own name in the message
        settings = CompareSettings(device=device, rtol=rtol, atol=atol, ulps=ulps, progress=progress)
    elif options is None:
        options = settings.flag_options()
    return _bisect_passes(comp, args, want, scales, settings, options, max_compiles)


def _bisect_passes(comp: XlaComputation, args: Sequence[Any], want: Sequence[np.ndarray[Any, Any]],
                   scales: Sequence[Any], settings: CompareSettings, options: CompileOptions | None,
                   max_compiles: int) -> PassBisection:
    from ..runtime import CompileOptions
    from ..runtime import compile as _compile
    from ._report import compare_one

    s = settings
    device, rtol, atol, ulps, say = s.device_to_run(), s.rtol, s.atol, s.ulps, s.say
    target = _isolated(comp)
    base = [(k, v) for k, v in _env(options) if k != "xla_disable_hlo_passes"]
    result = PassBisection("not found")
    say("bisect passes: listing the passes of the compile")
    cands = pass_names(comp, device, options)
    result.compiles += 1
    result.candidates = cands
    cache: dict[frozenset[str], str] = {}

    def test(disabled: Sequence[str]) -> str:
        key = frozenset(disabled)
        if key in cache:
            return cache[key]
        if result.compiles >= max_compiles:
            raise _Budget
        result.compiles += 1
        say(f"bisect passes: compile {result.compiles}, disabling {len(disabled)} pass(es)")
        try:
            opts = CompileOptions(env_option_overrides=[*base, ("xla_disable_hlo_passes", ",".join(disabled))])
            out = _compile(target, device, options=opts, cache=False)(*args)
            got = [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]
            ok = len(got) == len(want) and all(
                compare_one(i, g, w, rtol, atol, sc, ulps).ok
                for i, (g, w, sc) in enumerate(zip(got, want, scales, strict=True)))
            verdict = "fixed" if ok else "diverges"
        except Exception:  # noqa: BLE001 - a compile XLA refuses with these passes off: unknown
            verdict = "unknown"
            result.unknown.append(sorted(disabled))
        cache[key] = verdict
        return verdict

    try:
        if not cands:
            result.note = "XLA's dump named no passes for this compile"
            return result
        first = test(cands)
        start = cands
        if first == "diverges":  # passes interact (without one, another goes wrong): singles, then groups
            from ._judge import search_parts

            found, result.note = search_parts(cands, test)
            if found is None:
                return result
            start = found
        if first == "unknown":
            # Some passes cannot be left out (XLA:CPU needs their rewrites): grow a set pass by pass,
            # in pipeline order, keeping each whose disabling the compile survives, until it fixes.
            grown: list[str] = []
            verdict = "diverges"
            for name in cands:
                v = test([*grown, name])
                if v == "unknown":
                    continue
                grown.append(name)
                if v == "fixed":
                    verdict = v
                    break
            if verdict != "fixed":
                result.note = ("no set of passes the compile can do without removes the divergence (disabling "
                               "every pass makes the compile fail)")
                return result
            start = grown
        result.passes = _ddmin(start, test)
        result.status = "found"
    except _Budget:
        result.note = f"stopped after {max_compiles} compiles"
        result.status = "not found"
    return result


class _Budget(Exception):
    pass


def _ddmin(items: list[str], test: Callable[[Sequence[str]], str]) -> list[str]:
    """Zeller's ddmin: a 1-minimal subset of ``items`` for which ``test`` says ``"fixed"`` (``items``
    itself must)."""
    c = list(items)
    n = 2
    while len(c) >= 2:
        chunks = [c[i * len(c) // n:(i + 1) * len(c) // n] for i in range(n)]
        chunks = [ch for ch in chunks if ch]
        for ch in chunks:
            if test(ch) == "fixed":
                c, n = ch, 2
                break
        else:
            for ch in chunks:
                rest = [x for x in c if x not in ch]
                if rest and test(rest) == "fixed":
                    c, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(c):
                    break
                n = min(len(c), 2 * n)
    return c
