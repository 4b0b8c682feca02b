"""``bisect="passes"`` between two environments (``compare(..., against=OtherEnvironment(PATH),
bisect="passes")``, ``xlasdk compare FILE --against-python PATH --bisect passes``).

Which side to bisect: each side's outputs are judged against the reference evaluator at the device's
error model (the default tolerances, whatever the comparison's own); the side that leaves it while
the other stays is the one that diverges, and its passes are searched (delta debugging,
:mod:`._bisect_passes`) for a set whose disabling makes its outputs match the other side's (within
the comparison's tolerances). When both or neither leave the reference (or the reference evaluator
has no rule for an op: no side is the wrong one), this environment's side is searched first, then,
when no set is found there, the other's; the report says which and why.

On the other side each trial is one run there (its worker, :meth:`OtherEnvironment.run`) with
``xla_disable_hlo_passes``; its passes are read from XLA's per-pass dump written there into a
private temporary directory of this machine. Both releases' lists of the passes that changed the
module are compared: the names one has and the other lacks (a pass added, removed or renamed
between the releases, or one that changes this module in one release only) are reported.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import OtherEnvironmentError, XlaSdkError
from ._bisect_passes import PassBisection, StartingPoint, _bisect_passes, _isolated, _Run, pass_names, passes_in_dump

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ._other_env import OtherEnvironment
    from ._runners import OpsBisector
    from ._settings import CompareSettings

__all__ = ["bisect_passes_between"]


def _within_model(comp: XlaComputation, args: Sequence[Any], outputs: Sequence[np.ndarray[Any, Any]],
                  settings: CompareSettings) -> bool | None:
    """Whether ``outputs`` match the reference evaluator at the device kind's error model (None when
    the evaluator cannot judge them: an op without a rule, a bound too loose)."""
    from ._compare import compare
    from ._settings import CompareSettings

    try:
        r = compare(comp, list(args), settings=CompareSettings(device=settings.device, device_kind=settings.kind,
                                                               outputs=tuple(np.asarray(o) for o in outputs)))
    except XlaSdkError:
        return None
    from ._orders import verdict

    v = verdict(r)
    return True if r.ok else (None if v == "CANNOT JUDGE" else False)


class _ThereRun(_Run):
    """A trial in the other environment: its run with the passes disabled."""

    env: OtherEnvironment

    def outputs(self, disabled: Sequence[str]) -> list[np.ndarray[Any, Any]]:
        overrides = dict(self.start.options(disabled).env_option_overrides)
        a = self.env.run(self.comp, self.args, self.settings, overrides)
        if a.error is not None or a.outputs is None:
            raise OtherEnvironmentError(f"{self.env.label}: {a.error}")
        return list(a.outputs)


def _passes_there(env: OtherEnvironment, comp: XlaComputation, args: Sequence[Any], settings: CompareSettings,
                  overrides: dict[str, Any]) -> list[str]:
    d = tempfile.mkdtemp(prefix="xlasdk-passes-there-")
    try:
        a = env.run(comp, args, settings, {**overrides, "xla_dump_to": d, "xla_dump_hlo_pass_re": ".*"})
        if a.error is not None:
            raise OtherEnvironmentError(f"{env.label}: XLA could not compile {comp.name!r} there with its per-pass "
                                        f"dump: {a.error}")
        return passes_in_dump(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def bisect_passes_between(env: OtherEnvironment, bisector: OpsBisector, want: Sequence[np.ndarray[Any, Any]],
                          scales: Sequence[Any]) -> PassBisection:
    """The pass bisection on the side that diverges (see the module), with both releases' pass lists
    compared.

    Raises
    ------
    OtherEnvironmentError
        The other environment gave no answer, or could not compile the module with its dump.
    """
    s = bisector.settings
    comp = _isolated(bisector.computation)
    args = bisector.args
    here_out = [np.asarray(o.got) for o in bisector.report.outputs]
    there_out = [np.asarray(w) for w in want]
    here_ok = _within_model(comp, args, here_out, s)
    there_ok = _within_model(comp, args, there_out, s)
    options = bisector.options if bisector.options is not None else s.flag_options()
    start_here = StartingPoint.of(options, os.environ.get("XLA_FLAGS"))
    s.say("bisect passes: listing the passes of both releases' compiles")
    here_passes = pass_names(comp, s.device_to_run(), start_here.options())
    overrides = env.overrides(s)
    there_passes = _passes_there(env, comp, args, s, overrides)
    from ..runtime import CompileOptions

    def on(side: str) -> PassBisection:
        if side == "here":
            return _bisect_passes(comp, args, there_out, scales, s, start_here, list_passes=lambda: here_passes)
        start_there = StartingPoint.of(CompileOptions(env_option_overrides=overrides), None)
        run = _ThereRun(comp, args, here_out, scales, s, start_there)
        run.env = env
        found = _bisect_passes(comp, args, here_out, scales, s, start_there, run=run,
                               list_passes=lambda: there_passes)
        found.compiles += 1  # its dump
        if found.xla_flags:
            found.note = ((f"{found.note}; " if found.note else "")
                          + "the XLA_FLAGS line is the other environment's good run (its own $XLA_FLAGS not read)")
        return found

    if here_ok is False and there_ok is True:
        side, why = "here", "this side's outputs leave the reference evaluator's bound, the other's do not"
        result = on(side)
    elif here_ok is True and there_ok is False:
        side, why = "there", "the other side's outputs leave the reference evaluator's bound, this side's do not"
        result = on(side)
    else:  # no side is the wrong one: each is searched for passes that make it match the other, here first
        said = {True: "within", False: "outside", None: "not judged by"}
        how = (f"this side's outputs are {said[here_ok]} the reference evaluator's bound, the other's "
               f"{said[there_ok]} it")
        side, why = "here", f"{how}: this side searched first, against the other's outputs"
        result = on(side)
        if result.status != "found":
            first = result
            side, why = "there", (f"{how}: no pass set here made this side match ({first.status}), so the other "
                                  "side was searched, against this side's outputs")
            result = on(side)
            result.compiles += first.compiles
    result.side, result.side_reason = side, why
    result.passes_only_here = [p for p in here_passes if p not in set(there_passes)]
    result.passes_only_there = [p for p in there_passes if p not in set(here_passes)]
    return result
