"""``bisect="passes"`` (:func:`bisect_passes`): a minimal set of the XLA passes whose disabling
removes a divergence, by delta debugging (:mod:`._ddmin`) over the passes that change the module
(see :mod:`xlasdk.reference.bisect`), and the ``XLA_FLAGS`` line that reproduces the good run."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._numbers import COUNT, tolerances
from ..errors import CompareArgumentError
from ._ddmin import Interaction, Outcome, TrialBudgetSpent, Trials, describe, interaction, minimal_sets
from ._settings import DEFAULT_MAX_TRIALS, CompareSettings, refuse_both, resolve_device

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ..runtime import CompileOptions
    from ..runtime._options import OptionValue
    from ._settings import DeviceLike

__all__ = ["PassBisection", "bisect_passes", "pass_names", "passes_in_dump", "DEFAULT_MAX_TRIALS", "StartingPoint"]

_DISABLE = "xla_disable_hlo_passes"
_DISABLE_ALL = "xla_disable_all_hlo_passes"


@dataclass
class PassBisection:
    """The result of ``bisect="passes"``.

    ``status``: ``"no divergence"``; ``"found"`` (disabling ``passes``, over the passes disabled
    already, makes the outputs match, no pass of it can be left out, and two final compiles
    confirmed it: with the set disabled the outputs match, with it enabled they diverge);
    ``"unverified"`` (a set was found but a final compile disagreed: the outputs vary from run to
    run, or with the compile); ``"not found"`` (no set of the candidates removes it, the
    trials' limit was reached, or there is no pass to disable).
    ``passes``: the set found (the first of ``sets``); ``sets``: every 1-minimal set found,
    disjoint, each enough alone; ``interaction``: how they relate (an
    :class:`~xlasdk.reference._ddmin.Interaction`: ``SINGLE`` one pass, ``TOGETHER`` only the
    passes of one set together, ``EITHER`` any one of several sets). ``candidates``: the passes
    that changed the module in this compile (from XLA's per-pass dump); ``disabled_before``: the
    passes disabled already (the compile options' ``xla_disable_hlo_passes``: a dump's
    ``debug_options``, the xla flags given; and ``$XLA_FLAGS``'), which stay disabled in every
    trial; ``xla_flags``: the ``XLA_FLAGS=...`` line that reproduces the good run (every XLA flag the
    compile had, with ``passes`` and ``disabled_before`` disabled; "" when nothing was found);
    ``trials``: the compiles the search made (each distinct set once), ``max_trials`` its limit and
    ``budget_hit`` whether the search stopped there; ``compiles``: all compiles (the listing of the
    passes and the two final ones included); ``unknown``: sets whose disabling made the compile
    or the run fail (counted as not removing it).
    """

    status: str
    passes: list[str] = field(default_factory=list)
    sets: list[list[str]] = field(default_factory=list)
    interaction: Interaction = Interaction.NONE
    candidates: list[str] = field(default_factory=list)
    disabled_before: list[str] = field(default_factory=list)
    xla_flags: str = ""
    trials: int = 0
    max_trials: int = DEFAULT_MAX_TRIALS
    budget_hit: bool = False
    compiles: int = 0
    unknown: list[list[str]] = field(default_factory=list)
    note: str = ""
    #: between two environments (``against=OtherEnvironment``): the side bisected (``"here"`` or
    #: ``"there"``: the one whose outputs leave the device's model of the reference, or ``"here"``
    #: when both or neither do), why, and the passes that changed the module in one release's compile
    #: and not in the other's (None: not between environments)
    side: str | None = None
    side_reason: str = ""
    passes_only_here: list[str] | None = None
    passes_only_there: list[str] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "passes": self.passes, "sets": self.sets,
                "interaction": self.interaction.value, "candidates": self.candidates,
                "disabled_before": self.disabled_before, "xla_flags": self.xla_flags, "trials": self.trials,
                "max_trials": self.max_trials, "budget_hit": self.budget_hit, "compiles": self.compiles,
                "unknown": self.unknown, "note": self.note, "side": self.side, "side_reason": self.side_reason,
                "passes_only_here": self.passes_only_here, "passes_only_there": self.passes_only_there}

    def __str__(self) -> str:
        head = f"bisect passes: {self.status}"
        if self.compiles:
            head += (f" ({self.compiles} compiles, {self.trials} trials of at most {self.max_trials}, "
                     f"{len(self.candidates)} candidate passes)")
        out = [head]
        if self.side is not None:
            out.append(f"  bisected {'in this environment' if self.side == 'here' else 'in the other environment'}"
                       f" ({self.side_reason})")
        if self.passes_only_here is not None and self.passes_only_there is not None:
            if self.passes_only_here or self.passes_only_there:
                out.append("  the pass lists differ: only here " + (", ".join(self.passes_only_here) or "none")
                           + "; only there " + (", ".join(self.passes_only_there) or "none"))
            else:
                out.append("  the same passes changed the module in both releases' compiles")
        if self.disabled_before:
            out.append(f"  disabled already, and kept so: {', '.join(self.disabled_before)}")
        if self.sets:
            out.append(f"  disabling {describe(self.sets)} removes the divergence")
            if self.interaction is Interaction.EITHER:
                out.append("  (the passes interact: the divergence needs each of these sets' rewrites)")
        if self.xla_flags:
            out.append(f"  the good run: {self.xla_flags}")
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
        return passes_in_dump(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def passes_in_dump(d: str) -> list[str]:
    """The passes that changed the module in the per-pass dump (``xla_dump_hlo_pass_re=.*``) written
    into directory ``d``, in first-run order (pipelines left out)."""
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


# -- where the search starts ---------------------------------------------------------------------------------------
def _flag_text(value: OptionValue) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _names(text: str) -> list[str]:
    return [p for p in (x.strip() for x in text.split(",")) if p]


def _true(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1"))


@dataclass(frozen=True)
class StartingPoint:
    """What every trial compiles with: ``overrides``, the compile options' XLA flags (a dump's
    ``debug_options``, the xla flags given, compare's own) without ``xla_disable_hlo_passes``;
    ``environment``, the flags of ``$XLA_FLAGS`` (``--name=value`` words, as written) that the
    overrides do not set, without it either; ``disabled``, the passes disabled already by either
    (kept disabled: a compile option ``xla_disable_hlo_passes`` replaces ``$XLA_FLAGS``' rather
    than adding to it); ``all_disabled``, whether ``xla_disable_all_hlo_passes`` is set."""

    overrides: tuple[tuple[str, OptionValue], ...]
    environment: tuple[str, ...]
    disabled: tuple[str, ...]
    all_disabled: bool

    @classmethod
    def of(cls, options: CompileOptions | None, xla_flags_env: str | None) -> StartingPoint:
        """The starting point of compile options ``options`` under ``$XLA_FLAGS`` = ``xla_flags_env``.

        Raises
        ------
        CompareArgumentError
            ``$XLA_FLAGS`` that cannot be split into words (an unclosed quote).
        """
        try:
            words = shlex.split(xla_flags_env or "")
        except ValueError as e:
            raise CompareArgumentError(f"bisect_passes: $XLA_FLAGS cannot be split into flags ({e}): expected "
                                       f"--xla_NAME=VALUE words, got {xla_flags_env!r}") from None
        given = dict(_env(options))
        disabled: dict[str, None] = {}
        environment: list[str] = []
        all_disabled = _true(given.get(_DISABLE_ALL, False))
        for word in words:
            name, eq, raw = word.lstrip("-").partition("=")
            if name == _DISABLE:
                disabled.update(dict.fromkeys(_names(raw)))
            elif name not in given:
                environment.append(word)
                if name == _DISABLE_ALL and (not eq or _true(raw)):
                    all_disabled = True
        if _DISABLE in given:
            disabled.update(dict.fromkeys(_names(_flag_text(given[_DISABLE]))))
        overrides = tuple((k, v) for k, v in given.items() if k != _DISABLE)
        return cls(overrides, tuple(environment), tuple(disabled), all_disabled)

    def options(self, more: Sequence[str] = ()) -> CompileOptions:
        """The compile options of a trial disabling ``more`` passes over :attr:`disabled`."""
        from ..runtime import CompileOptions

        passes = self.passes(more)
        return CompileOptions(env_option_overrides=[*self.overrides, *([(_DISABLE, ",".join(passes))]
                                                                     if passes else [])])

    def passes(self, more: Sequence[str] = ()) -> list[str]:
        """:attr:`disabled`, then those of ``more`` not among them."""
        return list(dict.fromkeys([*self.disabled, *more]))

    def xla_flags_line(self, more: Sequence[str]) -> str:
        """The shell line ``XLA_FLAGS=...`` of the compile disabling ``more`` over :attr:`disabled`:
        the environment's flags, then the options' (which win over them), then the passes."""
        words = [*self.environment, *(f"--{k}={_flag_text(v)}" for k, v in self.overrides),
                 f"--{_DISABLE}={','.join(self.passes(more))}"]
        return "XLA_FLAGS=" + shlex.quote(" ".join(words))


# -- the search ------------------------------------------------------------------------------------------------------
def bisect_passes(comp: XlaComputation, args: Sequence[Any], want: Sequence[np.ndarray[Any, Any]],
                  scales: Sequence[Any], *, device: DeviceLike = None, options: CompileOptions | None = None,
                  rtol: float | None = None, atol: float | None = None, ulps: float | None = None,
                  max_trials: int | None = None, progress: Callable[[str], None] | None = None,
                  settings: CompareSettings | None = None) -> PassBisection:
    """A minimal set of XLA passes whose disabling makes ``comp``'s outputs on ``device`` match
    ``want`` (the reference outputs; ``scales`` their term scales, as :func:`xlasdk.compare` computes
    them), by delta debugging (Zeller's ddmin) over the passes that change the module.

    The search starts from the compile as it diverges: ``options``' XLA flags (a dump's
    ``debug_options``, the flags given) and ``$XLA_FLAGS``; a pass either disables stays disabled
    in every trial. Each trial is a compile in xlasdk's worker process (an abort cannot take this
    one) with ``xla_disable_hlo_passes``; a set whose compile or run fails is unknown (never "removes
    it"). First the compile as given (the outputs must diverge: else ``"no divergence"``); then a set
    that removes the divergence: all the candidates, or when passes interact (disabling all of them
    does not), chunks and complements at finer and finer granularity; ddmin shrinks it to a 1-minimal
    set; the passes left are tried together for a second, disjoint set ("either of A or B"). Two final
    compiles, fresh, confirm it: the set disabled matches, enabled diverges. At most ``max_trials``
    trial compiles (default :data:`DEFAULT_MAX_TRIALS`; reported when reached).
    ``settings``: ``device``, the tolerances, ``progress`` and ``max_trials`` as one
    :class:`~xlasdk.CompareSettings` (as :func:`xlasdk.compare` hands them on; ``options`` left
    out: its ``xla_flags``), else the keywords.

    Returns
    -------
    PassBisection
        The set, how the passes interact, the ``XLA_FLAGS`` line of the good run, the trials made.

    Raises
    ------
    ToleranceError
        A tolerance that is not a finite number >= 0.
    CompareArgumentError
        ``settings`` given with one of the keywords it holds; ``max_trials`` that is not an integer
        >= 1; ``$XLA_FLAGS`` that cannot be split into words.
    """
    refuse_both("bisect_passes", settings, device=device, rtol=rtol, atol=atol, ulps=ulps, progress=progress,
                max_trials=max_trials)
    if settings is None:
        rtol, atol, ulps = tolerances("bisect_passes", rtol, atol, ulps)  # its own name in the message
        limit = DEFAULT_MAX_TRIALS if max_trials is None else COUNT.check(
            max_trials, "bisect_passes: max_trials", CompareArgumentError)
        settings = CompareSettings(device=device, rtol=rtol, atol=atol, ulps=ulps, progress=progress,
                                   max_trials=limit)
    elif options is None:
        options = settings.flag_options()
    start = StartingPoint.of(options, os.environ.get("XLA_FLAGS"))
    return _bisect_passes(comp, args, want, scales, settings, start)


@dataclass
class _Run:
    """One compile and run of the program with some passes disabled, judged against ``want``."""

    comp: XlaComputation
    args: Sequence[Any]
    want: Sequence[np.ndarray[Any, Any]]
    scales: Sequence[Any]
    settings: CompareSettings
    start: StartingPoint
    compiles: int = 0

    def outputs(self, disabled: Sequence[str]) -> list[np.ndarray[Any, Any]]:
        """The outputs of the compile with ``disabled`` off (raises when XLA refuses it)."""
        from ..runtime import compile as _compile

        out = _compile(self.comp, self.settings.device_to_run(), options=self.start.options(disabled),
                       cache=False)(*self.args)
        return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]

    def __call__(self, disabled: Sequence[str]) -> Outcome:
        from ._report import compare_one

        s = self.settings
        self.compiles += 1
        try:
            got = self.outputs(disabled)
        except Exception:  # noqa: BLE001 - a compile XLA refuses with these passes off: unknown
            return Outcome.UNRESOLVED
        ok = len(got) == len(self.want) and all(
            compare_one(i, g, w, s.rtol, s.atol, sc, s.ulps).ok
            for i, (g, w, sc) in enumerate(zip(got, self.want, self.scales, strict=True)))
        return Outcome.GOOD if ok else Outcome.BAD


def _bisect_passes(comp: XlaComputation, args: Sequence[Any], want: Sequence[np.ndarray[Any, Any]],
                   scales: Sequence[Any], settings: CompareSettings, start: StartingPoint,
                   run: _Run | None = None, list_passes: Callable[[], list[str]] | None = None) -> PassBisection:
    """The search; ``run`` (default: compiles here) makes each trial and ``list_passes`` (default: XLA's
    dump here) names the candidates: another environment's (:mod:`._bisect_passes_env`)."""
    say = settings.say
    if run is None:
        run = _Run(_isolated(comp), args, want, scales, settings, start)

    def trial(disabled: Sequence[str]) -> Outcome:
        say(f"bisect passes: trial {trials.count}, disabling {len(disabled)} pass(es)")
        return run(disabled)

    trials = Trials(trial, settings.max_trials)
    result = PassBisection("not found", disabled_before=list(start.disabled), max_trials=settings.max_trials)

    def done(status: str, note: str = "") -> PassBisection:
        result.status, result.note = status, note
        result.trials, result.compiles, result.unknown = trials.count, run.compiles, trials.unresolved
        return result

    if start.all_disabled:
        return done("not found", f"{_DISABLE_ALL} is set: every HLO pass is disabled already, none is left to "
                                 "bisect")
    say("bisect passes: listing the passes of the compile")
    result.candidates = cands = (list_passes() if list_passes is not None else
                                 pass_names(comp, settings.device_to_run(), start.options()))
    run.compiles += 1
    try:
        first = trials([])
        if first is Outcome.GOOD:
            return done("no divergence", "the outputs match as compiled: no pass to blame")
        if first is Outcome.UNRESOLVED:
            return done("not found", "the program as given could not be compiled or run")
        if not cands:
            return done("not found", "XLA's dump named no pass that changes this module")
        sets = minimal_sets(cands, trials)
    except TrialBudgetSpent:
        result.budget_hit = True
        return done("not found", f"stopped at the limit of {settings.max_trials} trials (max_trials / --max-trials) "
                                 "before a minimal set was found")
    if not sets:
        how = {Outcome.BAD: "does not remove it", Outcome.UNRESOLVED: "makes the compile fail",
               None: "was not tried"}[trials.known(cands)]
        return done("not found", f"disabling all {len(cands)} candidate passes {how}, and no part of them (chunks "
                                 "and complements, down to each pass alone and all but one) removes it: it is not "
                                 "one pass's doing, or comes from code generation")
    result.sets, result.passes, result.interaction = sets, sets[0], interaction(sets)
    say("bisect passes: two final compiles (the set disabled, then enabled)")
    good, bad = run(result.passes), run([])
    if good is not Outcome.GOOD or bad is not Outcome.BAD:
        what = ("with the set disabled the outputs did not match" if good is not Outcome.GOOD else
                "with the set enabled the outputs matched")
        return done("unverified", f"a final compile disagreed with the search ({what}): the outputs vary from "
                                  "compile to compile or run to run; nothing is claimed")
    result.xla_flags = start.xla_flags_line(result.passes)
    return done("found")
