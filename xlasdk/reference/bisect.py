"""Where a divergence comes from: the instruction that introduces it, the XLA passes that cause it,
and the first NaN/Inf (``xs.compare(..., bisect="ops"|"passes", find_nonfinite=True)``).

**Ops** (:func:`bisect_ops`). Instruction ``k`` (topological order, as
:meth:`XlaComputation.instructions <xlasdk.XlaComputation.instructions>` lists them) *introduces*
a divergence when its device value differs from the reference evaluator's rule applied to the
device's values of its operands, while those operands agree with the reference (so a wrong value
upstream is never blamed on its users). The search compiles the program cut after a candidate
instruction: ``comp.with_outputs(...)`` of the values live past it (and the candidate itself),
everything else as in the original, so XLA fuses and simplifies what comes before the cut as it
does in the full program. A binary search (O(log N) compiles) finds a cut ``k`` whose values
diverge from the reference while those of cut ``k - 1`` agree: the first such cut when a divergent
value stays live until it reaches an output (a value that diverges and is then dropped, say by a
select, can make it find a later one). The device's operand values of instruction ``k`` (from cut
``k - 1``, where everything agreed) are fed to its rule: a mismatch is the evidence that names it.
It is then compiled alone (``comp.extract``) on those operand values; when it is right alone, the
smallest group of consecutive preceding ops (its ancestors) whose compile still diverges is named:
an optimization across those ops (see ``bisect="passes"``). When instruction ``k`` is right on its
operands, nobody is blamed ("not localised"), and such a group is named when one exists.

**Passes** (:func:`bisect_passes`). The passes that change this module are read from the names
of XLA's per-pass dump files (``xla_dump_to`` + ``xla_dump_hlo_pass_re=.*``, in a temporary
directory); delta debugging (Zeller's ddmin, :mod:`._ddmin`) over them, each trial a compile with
``xla_disable_hlo_passes`` in xlasdk's worker process, finds a 1-minimal set (no pass of it can be
left out) whose disabling makes the outputs match the reference. It starts from the compile as it
diverges: the passes its options (a dump's ``debug_options``, the flags given) and ``$XLA_FLAGS``
disable stay disabled. When disabling every candidate does not remove the divergence (passes
interact: without one, another goes wrong) or makes the compile fail, chunks and complements at
finer and finer granularity give the start. The passes left are tried for a second set ("either
of A or B"); a set of two or more is "A and B together" (no pass of it alone was enough). A set
whose disabling makes the compile (or run) fail is *unknown*, never "fixes it". Two final compiles
confirm the set (disabled: match; enabled: divergence), and the report gives the ``XLA_FLAGS``
line of the good run; at most ``max_trials`` trials.

**Non-finite values** (:func:`find_nonfinite`): the first instruction (topological order) whose
device value holds a NaN or an Inf while its operands hold none, from one compile with every
intermediate value exposed (``with_outputs``); when exposing them makes the NaN/Inf of the outputs
vanish, it says so ("not localised") and blames nobody.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._bisect_core import (
    _OPS_METHOD,
    BISECT_MODES,
    ERROR_CLASSES,
    Culprit,
    OpError,
    OpsBisection,
    _bisect_ops,
    _CutFailed,
    _op_errors,
    _Program,
    hlo_line,
    local_divergences,
)
from ._bisect_html import ERROR_COLORS, html_report
from ._bisect_nonfinite import NonFinite, NonFiniteSource, find_nonfinite
from ._bisect_passes import PassBisection, bisect_passes, pass_names
from ._bisect_regions import descend
from ._settings import CompareSettings, refuse_both

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ..runtime import CompileOptions
    from ._settings import DeviceLike

__all__ = ["Culprit", "OpsBisection", "PassBisection", "NonFinite", "NonFiniteSource", "bisect_ops",
           "bisect_passes", "find_nonfinite", "local_divergences", "pass_names", "html_report", "BISECT_MODES",
           "OpError", "ERROR_CLASSES", "ERROR_COLORS", "hlo_line", "_Program"]


def bisect_ops(comp: XlaComputation, args: Sequence[Any], *, device: DeviceLike = None,
               options: CompileOptions | None = None, rtol: float | None = None, atol: float | None = None,
               ulps: float | None = None, diverged: bool | None = None, progress: Callable[[str], None] | None = None,
               device_kind: str | None = None, precision: str | None = None,
               settings: CompareSettings | None = None) -> OpsBisection:
    """The first instruction that introduces a divergence of ``comp``'s outputs on ``device`` from
    the reference evaluator (see the module's docstring). ``options``: the compile options of the
    comparison (xla flags); ``diverged``: whether the outputs diverge, when the caller knows (else
    one compile finds out). ``settings``: ``device``, the tolerances, ``progress``, ``device_kind``
    and ``precision`` as one :class:`~xlasdk.CompareSettings` (as :func:`xlasdk.compare` hands
    them on; ``options`` left out: its ``xla_flags``), else the keywords (``options`` left out:
    XLA's defaults). Either way ``device_kind`` left out is the device's kind (a TPU's ops are
    judged by the TPU's error model), as :func:`xlasdk.compare` judges them.
    Returns an :class:`OpsBisection`; ``status="no divergence"`` when the outputs match.

    Raises
    ------
    UnsupportedOpError
        An op has no reference rule (the search needs every value's reference).
    CompareArgumentError
        ``settings`` given with one of the keywords it holds, or settings of recorded outputs
        (nothing to bisect on a device).
    """
    refuse_both("bisect_ops", settings, device=device, rtol=rtol, atol=atol, ulps=ulps, progress=progress,
                device_kind=device_kind, precision=precision)
    s = settings if settings is not None else CompareSettings(
        device=device, rtol=rtol, atol=atol, ulps=ulps, progress=progress, precision=precision,
        device_kind=device_kind)  # left out: the device's kind, as compare judges it
    if settings is not None and options is None:
        options = settings.flag_options()
    p = _Program(comp, args, s, options)
    try:
        result = _bisect_ops(p, diverged, s.say, descend=descend)
    except _CutFailed as e:
        result = OpsBisection("not localised", compiles=p.compiles, method=_OPS_METHOD,
                              note=f"a program cut out of this one could not be compiled or run ({e}); nothing is "
                                   "blamed")
    if result.status == "not localised" and s.rtol is None and s.atol is None and s.ulps is None:
        result.note += ("; a smaller error may hide under the default tolerances: a stricter one (--ulps 1 --rtol 0 "
                        "--atol 0) may localise it")
    if result.status != "no divergence":
        s.say("bisect ops: one compile with every value exposed, for each instruction's error (the report's colors)")
        result.op_errors = _op_errors(p)
        result.compiles = p.compiles
    return result
