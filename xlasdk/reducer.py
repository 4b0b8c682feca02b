"""Shrinking a module that shows a problem to the smallest module that still shows it
(:func:`reduce`, ``xlasdk reduce``): XLA's ``hlo_bisect`` and C-Reduce's greedy strategies on the
typed instruction graph.

A *candidate* is a smaller module made from the current one by one of the strategies below; it
is printed as HLO text and kept when the condition still holds on that very text (so the module
written at the end is exactly one that was checked). The strategies, in rounds until none makes
the module smaller:

- drop outputs (delta debugging over the values no other instruction reads);
- cut the instruction sequence: keep a prefix (its last values become the outputs) or a suffix
  (the values it reads from before the cut become parameters), the cut point found by bisection;
- replace one instruction by a parameter (its value, when the arguments are known, becomes the
  argument) or by a constant (its value on the arguments, from the reference evaluator, else
  zeros), dropping what only it read;

and, once none of those shrinks it, the simplifications (C-Reduce's and hlo_bisect's passes over
shapes and attributes), again in rounds with the cuts while anything shrinks:

- shrink a dimension size: every dimension of size D in the module becomes 1, or D // 2
  (constants and arguments keep their leading elements);
- drop the metadata (every location: ``metadata=`` and the stack-frame tables go), then one
  attribute at a time (frontend attributes, shardings, backend configs, layouts, precision
  config; window strides, dilations and padding, whose defaults are the trivial window);
- replace a constant's literal by a splat of its first element.

When none of those shrinks it, the instructions inside regions (a ``while``'s body and condition,
branches, reducers) are bypassed (replaced by an operand of their shape) or made zeros, one at a
time, the rounds above running again after each (:mod:`xlasdk._reduce_regions`; a loop's counter,
what its condition reads, is left alone so that the loop still ends).

A module is smaller when it has fewer instructions, then fewer parameters, then fewer elements
(over every instruction's result), then shorter text. A candidate XLA's converter cannot print
(it dies folding some constants) is printed by xlasdk's direct printer
(:func:`xlasdk._reduce_graph.direct_hlo_text`); a simplification that makes an invalid module is rejected when
it is loaded, as every candidate is, and counted (:attr:`ReduceResult.invalid`).

Conditions: ``"crash"`` (XLA aborts or its process dies compiling the module: checked in xlasdk's
worker process, never in this one), ``"compile-error"`` / ``"compile-error=REGEX"``
(the compile fails cleanly with a message ``re.search`` finds REGEX in), ``"diverge"``
(:func:`xlasdk.compare` against the reference evaluator reports a divergence) and a script
(``script="CMD"``: the candidate's HLO text is written to a file whose path is appended to CMD,
run by the shell; exit 0 means "still interesting", as ``hlo_bisect --script``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._jaxlib import isolated
from ._numbers import SECONDS, SEED, tolerances
from ._reduce_condition import Condition
from ._reduce_graph import MAX_CONSTANT_ELEMENTS as MAX_CONSTANT_ELEMENTS
from ._reduce_graph import ReduceResult as ReduceResult
from ._reduce_graph import ReduceStep as ReduceStep
from ._reduce_graph import _arguments, _Invalid, _module, _random_arguments, _Reducer, _Unprintable
from ._reduce_regions import run_with_regions
from ._where import where
from .errors import FormatError, NotReproducedError, PlatformLoweringError, XlaSdkError

if TYPE_CHECKING:
    from .program.computation import XlaComputation
    from .runtime.per_partition import PerPartitionPlan

__all__ = ["NotReproducedError", "ReduceResult", "ReduceStep", "reduce"]



# -- the worker side -------------------------------------------------------------------------------
def _load_in_worker(text: str) -> tuple[str, str]:
    """(the StableHLO text, the module name) of HLO ``text``, loaded as :func:`xlasdk.load_computation`
    loads it (runs in the worker process); raises ``isolated.Failed`` with the stage and XLA's message."""
    from .formats.untrusted import load_hlo_in_worker
    from .program._worker import module_text_in_worker

    _, bytecode, name, _, attributes, _ = load_hlo_in_worker("text", text, "candidate")
    return module_text_in_worker(bytecode, attributes), name


def _compile_in_worker(mtext: str, name: str, topology: str | None = None) -> None:
    """Compile a loaded module for the CPU, or for one device of the TPU ``topology`` without a chip
    (runs in the worker process); raises ``isolated.Failed`` with stage ``compile`` and XLA's message."""
    if topology is None:
        from .runtime.isolated_compile import compile_in_worker

        compile_in_worker(mtext, 1, 1, (), name)
        return
    from ._jaxlib.mlir import without_copies
    from .runtime.topology import compile_for_topology_in_worker

    if "mhlo.copy" in mtext:  # as xs.compile hands it to a TPU (libtpu's pipeline refuses the op)
        mtext = without_copies(mtext)
    compile_for_topology_in_worker(mtext, topology, [0], 1, 1, (), name)


def _lowered_for_tpu(mtext: str, name: str) -> str:
    """A candidate's module with jaxlib's LAPACK custom calls lowered for a TPU, as :func:`xlasdk.compile`
    lowers them for one (:mod:`xlasdk.runtime._platform_lowering`); raises ``isolated.Failed`` (stage
    ``compile``) with the lowering's message where a call has no form on a TPU."""
    from .formats.load import computation_from_stablehlo  # loaded when a TPU candidate calls LAPACK
    from .runtime._platform_lowering import for_platform

    try:
        return for_platform(computation_from_stablehlo(mtext, name), "tpu").as_stablehlo_text()
    except PlatformLoweringError as e:
        raise isolated.Failed("compile", str(e).split(" — at ")[0]) from None


# -- conditions ------------------------------------------------------------------------------------
class _OutOfTime(Exception):
    pass


class _Stop(BaseException):
    """Raised inside the search thread when the time budget is spent (a BaseException, so that no
    ``except Exception`` of the code it interrupts, the reference evaluator's included, swallows it)."""


#: Seconds the search is given, once the budget is spent, to stop at its next Python step.
_STOP_GRACE_S = 2.0
_SEARCH_THREAD = "xlasdk-reduce-search"


def _run_bounded(work: Callable[[], None], deadline: float) -> str:
    """Run ``work`` in a daemon thread until it returns or ``deadline`` passes; then raise
    :class:`_Stop` in it (at its next Python step: a reference evaluation or a Python loop stops
    there) and wait :data:`_STOP_GRACE_S` more. ``"done"`` when ``work`` returned, ``"stopped"``
    when it was stopped, ``"abandoned"`` when it is still inside native code (an XLA run of a long
    loop), where nothing can stop it: it goes on in the background until that call returns, then
    stops. ``work``'s exceptions are raised here."""
    import ctypes

    errors: list[BaseException] = []
    stopped: list[bool] = []

    def target() -> None:
        try:
            work()
        except _Stop:
            stopped.append(True)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            errors.append(e)

    t = threading.Thread(target=target, name=_SEARCH_THREAD, daemon=True)
    t.start()
    try:
        t.join(max(0.0, deadline - time.monotonic()))
    finally:  # the budget is spent, or the caller was interrupted (Ctrl-C): stop the search
        if t.is_alive() and t.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident), ctypes.py_object(_Stop))
    t.join(_STOP_GRACE_S)
    if t.is_alive():
        return "abandoned"
    if errors:
        raise errors[0]
    return "stopped" if stopped else "done"


_NOT_LOADED = "loading"  # the start of a verdict on a candidate that did not load (an invalid module)


_Condition = Condition  # the search protocol, in ._reduce_condition (below ._reduce_partitions)


class _InWorker(_Condition):
    """XLA dies (``crash``) or fails cleanly (``compile-error``) compiling the candidate, for the
    CPU or for ``topology`` (a TPU without a chip). Without a REGEX, the failure must be the module
    given's: the same signature (:mod:`xlasdk._failure_signature`: the check's file:line, else the
    status code and the message with names and numbers normalised), pinned by the first check."""

    def __init__(self, kind: str, pattern: re.Pattern[str] | None, topology: str | None = None) -> None:
        self.kind = kind
        self.pattern = pattern
        self.topology = topology
        self.name = kind if pattern is None else f"{kind}={pattern.pattern}"
        if topology is not None:
            self.name += f" on {topology}"
        self.signature: str | None = None

    def _same(self, message: str, died: bool) -> tuple[bool, str]:
        from ._failure_signature import signature

        got = signature(message, died=died)
        if self.pattern is not None:
            return True, got
        if self.signature is None:
            self.signature = got  # the module given: its failure is the one kept
            return True, got
        return got == self.signature, got

    def holds(self, text: str, args: list[np.ndarray[Any, Any]] | None, timeout: float) -> tuple[bool, str]:
        # Two requests: a candidate XLA dies *loading* is not kept (the module written must load; the
        # module given loaded), only one it dies compiling.
        stage = "loading"
        end = time.monotonic() + timeout  # the two requests share the check's time
        try:
            mtext, name = isolated.request("xlasdk.reducer:_load_in_worker", text, timeout=timeout)
            stage = "compiling"
            if self.topology is not None and "lapack_" in mtext:  # as xs.compile for a TPU: LAPACK calls
                mtext = _lowered_for_tpu(mtext, name)  # become the TPU's own linear algebra first
            isolated.request("xlasdk.reducer:_compile_in_worker", mtext, name, self.topology,
                             timeout=max(0.5, end - time.monotonic()))
        except isolated.Failed as e:
            if self.kind != "compile-error" or e.stage != "compile":
                return False, f"{stage} failed ({e.stage}): {e.message}"
            found = self.pattern is None or self.pattern.search(e.message) is not None
            if not found:
                return False, f"compile error: {e.message}"
            same, sig = self._same(e.message, False)
            return same, f"compile error{'' if same else ' of another kind'} ({sig}): {e.message}"
        except isolated.WorkerDied as e:
            if e.timed_out or e.killed:  # a hang or an outside kill is not XLA dying on the module
                return False, f"no verdict: {e.reason}"
            if self.kind != "crash" or stage != "compiling":
                return False, f"XLA died {stage} it: {e.reason}"
            same, sig = self._same(e.reason, True)
            return same, f"XLA died compiling it{'' if same else ' another way'} ({sig}): {e.reason}"
        return False, "loads and compiles"


class _LoaderCrash(_Condition):
    """Loading the candidate's text kills the worker with the same fatal line as the module given."""

    compiles = False

    def __init__(self, signature: str) -> None:
        self.signature = signature
        self.name = "crash"

    def holds(self, text: str, args: list[np.ndarray[Any, Any]] | None, timeout: float) -> tuple[bool, str]:
        from ._reduce_text import loader_death

        got, why = loader_death(text, timeout)
        if got is not None and got != self.signature:
            return False, f"another crash: {why}"
        return got is not None, why


class _Diverge(_Condition):
    name = "diverge"
    needs_arguments = True

    def __init__(self, rtol: float | None, atol: float | None, excess_precision: bool) -> None:
        self.rtol, self.atol, self.excess_precision = rtol, atol, excess_precision

    def holds(self, text: str, args: list[np.ndarray[Any, Any]] | None, timeout: float) -> tuple[bool, str]:
        from .program.computation import XlaComputation
        from .reference import compare

        assert args is not None
        try:
            comp = XlaComputation.from_hlo_text(text)
            report = compare(comp, args, rtol=self.rtol, atol=self.atol, excess_precision=self.excess_precision)
        except XlaSdkError as e:  # cannot tell: never counted as a divergence
            return False, f"{'loading' if isinstance(e, FormatError) else 'no verdict'}: {type(e).__name__}: {e}"
        from .reference._orders import verdict

        return verdict(report) == "DIVERGENCE", str(report)  # a bound too loose to judge by is no divergence


class _Script(_Condition):
    compiles = False

    def __init__(self, command: str, directory: str) -> None:
        self.command = command
        self.name = f"script: {command}"
        self.path = os.path.join(directory, "candidate.hlo")

    def holds(self, text: str, args: list[np.ndarray[Any, Any]] | None, timeout: float) -> tuple[bool, str]:
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            r = subprocess.run(f"{self.command} {shlex.quote(self.path)}", shell=True, capture_output=True,
                               timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return False, f"the script ran past {timeout:g} s"
        return r.returncode == 0, f"the script exited with {r.returncode}"


def _condition(until: str | None, script: str | None, rtol: float | None, atol: float | None,
               excess_precision: bool, directory: str, topology: str | None = None) -> _Condition:
    if (until is None) == (script is None):
        raise XlaSdkError("reduce: give exactly one of until= ('crash', 'compile-error[=REGEX]', 'diverge') "
                          f"and script=; got until={until!r}, script={script!r}{where()}")
    if script is not None:
        if not isinstance(script, str) or not script.strip():
            raise XlaSdkError(f"reduce: script must be a shell command, got {script!r}{where()}")
        return _Script(script, directory)
    assert until is not None
    if until == "crash":
        return _InWorker("crash", None, topology)
    if until == "diverge":
        return _Diverge(rtol, atol, excess_precision)
    if until == "compile-error" or until.startswith("compile-error="):
        regex = until.partition("=")[2]
        try:
            pattern = re.compile(regex) if regex else None
        except re.error as e:
            raise XlaSdkError(
                f"reduce: until={until!r}: the regular expression does not compile: {e}{where()}") from None
        return _InWorker("compile-error", pattern, topology)
    raise XlaSdkError(f"reduce: until={until!r}: expected 'crash', 'compile-error', 'compile-error=REGEX' or "
                      f"'diverge'{where()}")


class _Search:
    def __init__(self, cond: _Condition, deadline: float | None, timeout: float,
                 progress: Callable[[ReduceStep], None] | None) -> None:
        self.cond = cond
        self.deadline = deadline
        self.timeout = timeout
        self.progress = progress
        self.cache: dict[str, bool] = {}
        self.candidates = self.compiles = self.cache_hits = self.steps = self.unprintable = self.invalid = 0
        self.started = time.monotonic()
        self.history: list[ReduceStep] = []

    def check(self, text: str, args: list[np.ndarray[Any, Any]] | None) -> bool:
        h = hashlib.sha256(text.encode())
        for a in args or ():
            h.update(str((a.dtype, a.shape)).encode())
            h.update(np.ascontiguousarray(a).tobytes())
        key = h.hexdigest()
        if key in self.cache:
            self.cache_hits += 1
            return self.cache[key]
        limit = self.timeout
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise _OutOfTime
            limit = max(1.0, min(limit, left))
        self.candidates += 1
        self.compiles += int(self.cond.compiles)
        ok, why = self.cond.holds(text, args, limit)
        if why.startswith(_NOT_LOADED):
            self.invalid += 1
        self.cache[key] = ok
        return ok

    def accept(self, strategy: str, instructions: int) -> None:
        self.steps += 1
        step = ReduceStep(self.steps, strategy, instructions, self.candidates, self.compiles,
                          time.monotonic() - self.started)
        self.history.append(step)
        if self.progress is not None:
            self.progress(step)


# -- arguments -------------------------------------------------------------------------------------
def _topology_of(device: Any) -> str | None:
    """The TPU topology ``device`` belongs to (each candidate is compiled for it in the worker, no
    chip needed): ``xs.topology(NAME).devices[i]``, or a TPU chip's device (its slice's topology);
    None for a CPU device. Any other device is refused."""
    from .runtime.device import Device, _resolve_device

    try:
        dev = device if isinstance(device, Device) else _resolve_device(device)
    except XlaSdkError as e:
        raise XlaSdkError(f"reduce: device={device!r}: {e}") from None
    if dev.client.compile_only is not None:
        return str(dev.client.compile_only)
    if dev.platform == "cpu":
        return None
    if dev.platform == "tpu":
        from .runtime.topology import chip_topology

        name = chip_topology([dev])
        if name is not None:
            return name
    raise XlaSdkError(f"reduce: device={dev}: until='crash' and 'compile-error' compile each candidate in xlasdk's "
                      f"worker for the CPU or for a TPU topology (xs.topology('v5e:1x1').devices[0]); got a "
                      f"{dev.platform} device{where()}")


# -- the entry point -------------------------------------------------------------------------------
def reduce(
    computation: XlaComputation | PerPartitionPlan | str | os.PathLike[str],
    until: str | None = None,
    *,
    script: str | None = None,
    arguments: Sequence[Any] | None = None,
    seed: int = 0,
    max_time: float | None = None,
    check_timeout: float = 300.0,
    rtol: float | None = None,
    atol: float | None = None,
    excess_precision: bool = False,
    progress: Callable[[ReduceStep], None] | None = None,
    against: XlaComputation | str | os.PathLike[str] | None = None,
    device: Any = None,
) -> ReduceResult:
    """The smallest module found that still shows the problem ``until`` (or ``script``) describes.

    Parameters
    ----------
    computation: the module (loaded or built) that shows the problem, or the path of its file. A
        file of HLO or MLIR text that XLA's loader dies on (it never becomes a computation) is cut
        as text (with ``until="crash"`` or a ``script``): instructions, lines and attributes are
        deleted (:mod:`xlasdk._reduce_text`), each candidate loaded in the worker and kept when
        XLA still dies loading it on the same fatal line; the result's ``computation`` is then
        None and ``hlo_text`` is the text (MLIR text for an MLIR file). An optimized
        per-partition dump (one partition's program of an SPMD program of N partitions, or its
        :class:`~xlasdk.runtime.per_partition.PerPartitionPlan`) is reduced with ``"diverge"``
        (or a script): each cut runs on all N partitions and each partition's outputs are judged
        against the reference evaluator on the cut, every partition simulated
        (:mod:`xlasdk._reduce_partitions`); ``arguments`` are the program's global arrays (split
        by the plan) or each parameter's N per-partition arrays stacked on a leading axis, as the
        result's are; ``"crash"``, ``"compile-error"`` and ``against`` are refused.
    until: ``"crash"`` (XLA aborts or dies compiling it, loaded from its HLO text; checked in the
        worker process, never in this one; a candidate XLA dies *loading* is not kept),
        ``"compile-error"`` or ``"compile-error=REGEX"`` (the compile fails cleanly, with a message
        in which ``re.search`` finds REGEX), or
        ``"diverge"`` (:func:`xlasdk.compare` against the reference evaluator, with ``rtol``,
        ``atol`` and ``excess_precision``, reports a divergence on the arguments).
    script: instead of ``until``: a shell command; each candidate's HLO text is written to a file
        whose path is appended to it, and exit code 0 means the candidate still shows the problem.
    arguments: one array per parameter (``"diverge"``: default :func:`xlasdk.random_inputs` of
        ``seed``); intermediate values replaced by parameters or constants are computed from them
        by the reference evaluator.
    seed: the seed of those random arguments, an integer from 0 to 2**64 - 1.
    max_time: a budget in seconds: the search stops when it is spent, whatever a check is doing,
        and returns the smallest module found so far (``timed_out``), within a few seconds of the
        budget: a check in the worker is stopped, one in this process (a reference evaluation, a
        "diverge" run) is interrupted at its next Python step, and one still inside XLA's native
        code after 2 s more is abandoned (it ends in the background; nothing more is loaded, so
        the counts are then the search's own). Default: no limit.
    check_timeout: seconds one load or compile in the worker, or one script run, may take; one that
        runs longer counts as not showing the problem (``"diverge"`` compiles in the worker as
        every loaded module does, and runs the candidate in this process). It and ``max_time`` are
        numbers of seconds > 0 and <= 10**6 (NaN and infinities are refused: no limit is
        ``max_time=None``).
    progress: called with a :class:`ReduceStep` after each accepted reduction.
    against: instead of ``until`` and ``script``: a second module (or the path of its file) that
        computes what ``computation`` should (a program bug: an opcode, a compare direction, a
        constant edited). The result is a small cut of ``computation``, the instruction that first
        departs from its match in ``against`` (found by ``compare(..., against=GOOD,
        bisect="ops")``'s search, into ``while`` bodies, called functions, fusions and branches),
        with the values it reads as parameters and the good run's values of them as
        :attr:`~ReduceResult.arguments`; :attr:`~ReduceResult.good_computation` is the matching cut
        of ``against``. It is returned only when :func:`xlasdk.compare` of the cut against the good
        cut on those arguments says DIVERGENCE (at ``rtol``/``atol``, compare's by default); else a
        larger repro (the region's program, at worst the modules themselves) is
        (:mod:`xlasdk._reduce_against`). ``arguments``: BAD's and GOOD's (default
        :func:`xlasdk.random_inputs` of ``seed``).
    device: with ``against``: where both run (default: the first device). With
        ``against``, ``max_time`` is checked between the levels of the search and between its
        steps; once it is spent the modules themselves are the repro (``timed_out``). With
        ``until="crash"`` or ``"compile-error"``: what each candidate is compiled for, in the
        worker: a CPU device (the default), or a TPU's device (``xs.topology("v5e:1x1").devices[0]``,
        no chip needed; a chip's device compiles for its slice's topology): a failure only XLA:TPU
        has shrinks on a machine without a TPU.

    Without a REGEX, ``"crash"`` and ``"compile-error"`` keep the module given's failure: a
    candidate that fails another way (another check's file:line, another status code or message
    once names and numbers are normalised: :mod:`xlasdk._failure_signature`) is not kept.

    Returns
    -------
    :class:`ReduceResult`: the module (HLO text and computation), its arguments, instruction
    counts before and after, steps, candidates, compiles, wall time. The same input gives the same
    result (the search is deterministic; only ``max_time`` can stop it at another point).

    Raises
    ------
    NotReproducedError
        The module given does not satisfy the condition (printed as HLO text and checked as
        every candidate is); with ``against``: compare finds no divergence of the module from
        ``against`` on the arguments ("nothing to reduce").
    XlaSdkError
        A bad ``until``, both or neither of ``until`` and ``script``, arguments that do not match
        the parameters, a budget or seed out of its range, a budget spent before the check of the
        module given ended.
    ToleranceError
        ``rtol`` or ``atol`` that is not a finite number >= 0.
    """
    from .program.computation import XlaComputation

    started = time.monotonic()
    if max_time is not None:
        max_time = SECONDS.check(max_time, "reduce: max_time", hint="None for no limit")
    check_timeout = SECONDS.check(check_timeout, "reduce: check_timeout")
    seed = SEED.check(seed, "reduce: seed")
    rtol, atol, _ = tolerances("reduce", rtol, atol)
    topology = None
    if device is not None and against is None and until != "diverge":  # diverge: a per-partition dump's (below)
        if until is None:
            raise XlaSdkError(f"reduce: device= is where against= runs both modules, or what until='crash' or "
                              f"'compile-error' compiles for; give one of them with it{where()}")
        if until != "crash" and not until.startswith("compile-error"):
            raise XlaSdkError(f"reduce: device= is where against= runs both modules, or what until='crash' or "
                              f"'compile-error[=REGEX]' compiles each candidate for; got until={until!r}{where()}")
        topology = _topology_of(device)
    if against is not None:
        from ._reduce_against import reduce_to_repro

        if until is not None or script is not None:
            raise XlaSdkError(f"reduce: against= is a problem of its own: give no until= or script= with it; got "
                              f"until={until!r}, script={script!r}{where()}")
        return reduce_to_repro(computation, against, arguments, seed, max_time, rtol, atol, device, progress, started)
    path: str | None = None
    if isinstance(computation, (str, os.PathLike)):
        from .formats.load import load_computation

        path = os.fspath(computation)
        try:
            computation = load_computation(path)
        except FormatError as e:
            dies = _dies_loading(path, e, until, script, min(check_timeout, max_time or check_timeout))
            if dies is None:
                raise
            return _reduce_text(path, dies[0], dies[1], until, script, max_time, check_timeout, progress, started)
    from ._reduce_partitions import DivergePartitions, partition_arguments, plan_of

    plan = plan_of(computation, path, until, script)
    if plan is not None:
        computation = plan.computation
    if not isinstance(computation, XlaComputation):
        raise XlaSdkError(f"reduce: expected an XlaComputation or the path of a module file, got "
                          f"{type(computation).__name__}{where()}")
    partitions = None if plan is None else plan.num_partitions
    if device is not None and against is None and plan is None and until == "diverge":
        raise XlaSdkError(f"reduce: device= is where against= runs both modules, where an optimized per-partition "
                          f"dump's partitions run (until='diverge'), or what until='crash' or 'compile-error[=REGEX]' "
                          f"compiles each candidate for; got until='diverge' of {computation.name!r}, one device's "
                          f"program{where()}")
    with tempfile.TemporaryDirectory(prefix="xlasdk-reduce-") as tmp:
        cond = _condition(until, script, rtol, atol, excess_precision, tmp, topology)
        if plan is not None and isinstance(cond, _Diverge):
            cond = DivergePartitions(plan.num_partitions, plan.device_for(device), rtol, atol, excess_precision)
        if plan is not None and cond.needs_arguments:
            args: list[np.ndarray[Any, Any]] | None = partition_arguments(plan, arguments, seed)
        elif arguments is not None:
            args = _arguments(computation, arguments)
        elif cond.needs_arguments:
            args = _random_arguments(computation, seed)
        else:
            args = None
        try:
            start = _module(computation, args, partitions=partitions)
        except (_Unprintable, _Invalid) as e:
            raise XlaSdkError(f"reduce: the module {computation.name!r} cannot be printed as HLO text: {e}"
                              f"{where()}") from None
        deadline = None if max_time is None else started + max_time
        search = _Search(cond, deadline, check_timeout, progress)
        reducer = _Reducer(search, start)
        verdict: list[tuple[bool, str]] = []
        timed_out = False

        def work() -> None:
            nonlocal timed_out
            limit = check_timeout if deadline is None else max(1.0, min(check_timeout, deadline - time.monotonic()))
            verdict.append(cond.holds(start.text, args if cond.needs_arguments else None, limit))
            search.candidates += 1
            search.compiles += int(cond.compiles)
            if not verdict[0][0]:
                return
            try:
                run_with_regions(reducer)
            except _OutOfTime:
                timed_out = True

        # With a budget, the search runs in a thread that is stopped when the budget is spent, whatever
        # a check is doing (a check in the worker ends by then; one in this process, a reference
        # evaluation or an XLA run of a long loop, is stopped or abandoned): the smallest module
        # found so far is the result.
        if deadline is None:
            work()
            ended = "done"
        else:
            ended = _run_bounded(work, deadline)
        if not verdict:
            raise XlaSdkError(
                f"reduce: the time budget (max_time={max_time:g} s) ran out while checking that the module "
                f"{computation.name!r} shows the problem ({cond.name}), before any reduction: that one check "
                f"takes longer; give a larger max_time{where()}")
        ok, why = verdict[0]
        if not ok:
            if deadline is not None and time.monotonic() >= deadline and why.startswith("no verdict"):
                raise XlaSdkError(
                    f"reduce: the time budget (max_time={max_time:g} s) ran out while checking that the module "
                    f"{computation.name!r} shows the problem ({cond.name}) ({why}); give a larger max_time{where()}")
            raise NotReproducedError(
                f"reduce: the module {computation.name!r} does not show the problem ({cond.name}): {why}{where()}")
        timed_out = timed_out or ended != "done"
        best = reducer.cur
    history = list(search.history)
    if ended == "abandoned":
        # A check is still running in this process (native code nothing can stop) and may hold the
        # worker: nothing more is loaded. The counts are the search's own (before printing).
        before, after = len(start.instrs), len(best.instrs)
        final = best.comp
    else:
        # Both counts on the module as its HLO text loads back (the search's own measure counts the
        # candidate before printing; XLA's printer adds constants and tuple plumbing). A result that
        # counts more than the module given that way is not returned: the module given is.
        final = XlaComputation.from_hlo_text(best.text)
        loaded_before = len(XlaComputation.from_hlo_text(start.text).instructions()) if best is not start else None
        after = len(final.instructions())
        if loaded_before is None or after > loaded_before:
            best = start
            final = XlaComputation.from_hlo_text(start.text) if loaded_before is not None else final
            loaded_before = after = len(final.instructions())
        before = loaded_before
    return ReduceResult(
        computation=final, hlo_text=best.text, arguments=best.args, condition=cond.name,
        instructions_before=before, instructions_after=after, steps=search.steps,
        candidates=search.candidates, compiles=search.compiles, cache_hits=search.cache_hits,
        unprintable=search.unprintable, invalid=search.invalid,
        wall_s=time.monotonic() - started, timed_out=timed_out, history=history,
    )


# -- modules XLA's loader dies on: the text-level pass -------------------------------------------------
def _dies_loading(path: str, error: FormatError, until: str | None, script: str | None,
                  check_timeout: float) -> tuple[str, str] | None:
    """(the file's text, the crash signature) when loading the file's text kills XLA (checked in
    the worker), else None (the load failed cleanly: ``error`` is the answer)."""
    from ._atomic import read_regular_file
    from ._reduce_text import loader_death

    if "died" not in str(error) and "abort" not in str(error) and "crash" not in str(error):
        return None
    try:
        text = read_regular_file(path).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # a binary file (a proto, bytecode): no text to cut
    signature, why = loader_death(text, check_timeout)
    if signature is None:
        return None
    if script is None and until != "crash":
        raise XlaSdkError(f"reduce: {path}: XLA dies loading it ({why}): only until='crash' or a script can "
                          f"reduce such a module, as text{where()}")
    return text, signature


def _reduce_text(path: str, text: str, signature: str, until: str | None, script: str | None,
                 max_time: float | None, check_timeout: float, progress: Callable[[ReduceStep], None] | None,
                 started: float) -> ReduceResult:
    """:func:`reduce` of a module XLA dies loading: the text-level passes (:mod:`._reduce_text`)."""
    from ._reduce_text import TextReducer, count_instructions

    with tempfile.TemporaryDirectory(prefix="xlasdk-reduce-") as tmp:
        cond: _Condition = (_LoaderCrash(signature) if script is None
                            else _condition(None, script, None, None, False, tmp))
        deadline = None if max_time is None else started + max_time
        search = _Search(cond, deadline, check_timeout, progress)
        search.candidates += 1  # the load that showed the crash
        verdict: list[tuple[bool, str]] = []

        def accept(strategy: str, t: str) -> None:
            search.accept(strategy, count_instructions(t))

        reducer = TextReducer(text, lambda t: search.check(t, None), accept)
        timed_out = False

        def work() -> None:
            nonlocal timed_out
            if script is not None:
                verdict.append(cond.holds(text, None, check_timeout))
                search.candidates += 1
                if not verdict[0][0]:
                    return
            else:
                verdict.append((True, ""))
            try:
                reducer.run()
            except _OutOfTime:
                timed_out = True

        ended = "done"
        if deadline is None:
            work()
        else:
            ended = _run_bounded(work, deadline)
        if not verdict:
            raise XlaSdkError(f"reduce: the time budget (max_time={max_time:g} s) ran out while checking that "
                              f"{path} shows the problem ({cond.name}){where()}")
        if not verdict[0][0]:
            raise NotReproducedError(f"reduce: {path} does not show the problem ({cond.name}): {verdict[0][1]}"
                                     f"{where()}")
        best = reducer.cur
    return ReduceResult(
        computation=None, hlo_text=best, arguments=None, condition=cond.name,
        instructions_before=count_instructions(text), instructions_after=count_instructions(best),
        steps=search.steps, candidates=search.candidates, compiles=search.compiles, cache_hits=search.cache_hits,
        unprintable=0, invalid=0, wall_s=time.monotonic() - started, timed_out=timed_out or ended != "done",
        history=list(search.history),
    )
