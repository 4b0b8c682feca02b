"""Comparing against the same module compiled and run under another Python environment (another
jaxlib / libtpu release): :class:`OtherEnvironment`, a :class:`~._runners.Reference` runner.

The other side is a subprocess of that environment's interpreter (``python=``: a Python, or any
executable that behaves as one, e.g. a wrapper script that sets ``XLA_FLAGS`` and execs python)
running this xlasdk's own code (``PYTHONPATH``: this package's parent directory, after the
environment's own). A bootstrap first reads that environment's versions from its package metadata
and refuses a jaxlib outside xlasdk's range before importing anything of xlasdk; then
:mod:`._env_worker` compiles the module's HLO text there and runs it on the inputs. Module, inputs
and outputs travel through a private temporary directory (mode 0700, removed after each run).

Fail closed: an interpreter that cannot be started, dies, runs past its time, or answers with
anything but the worker's result for this request is an :class:`OtherEnvironmentError`, never a
verdict. XLA's own error in the other environment (it cannot compile the module) is one too, for
the comparison; inside ``bisect="ops"`` a cut that does not compile there stops the search, as a
cut that does not compile here does.

``bisect="ops"``: both environments run the module with every value exposed
(:meth:`~xlasdk.XlaComputation.with_outputs`), and the first instruction whose value differs while
the values it reads agree is named (:func:`._against.compare_programs`, the two sides being the
same module). When that instruction is a ``while``, a call or a branch whose operands agree, the
search goes inside it as against a second module (:mod:`._bisect_regions_against`), the other
side's region programs run there (one worker run per region program run: a ``while`` compared
iteration by iteration costs two runs there per iteration). When no instruction differs with every
value exposed (a difference XLA makes only when it compiles instructions together, which exposing
a value prevents), the module is cut the other way (:mod:`._bisect_env_suffix`): from an
instruction to its outputs, fed this environment's values of what it reads, on both sides.

``bisect="passes"``: :mod:`._bisect_passes_env` (the side that leaves the reference bisected, the
two releases' pass lists compared). :meth:`OtherEnvironment.optimized_hlo`: the optimized HLO XLA
makes there (for a TPU topology without a chip, or the CPU), which :mod:`xlasdk.reference._optimized_diff`
compares with this environment's.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..errors import OtherEnvironmentError
from ._bisect_core import _CutFailed, _Program
from ._bisect_regions_against import RunsElsewhere
from ._runners import Expected, OpsBisector, Reference, both_models, given_outputs

if TYPE_CHECKING:
    from ..builder import XlaOp
    from ..program.computation import XlaComputation
    from ._optimized_diff import OptimizedDiff
    from ._precision import DeviceKind
    from ._settings import CompareSettings

__all__ = ["OtherEnvironment", "EnvSide", "EnvironmentVersions", "JAXLIB_RANGE", "this_environment",
           "compare_optimized_hlo", "in_range"]

#: xlasdk's supported jaxlib releases (pyproject's ``jaxlib>=0.10.2,<0.13``): lowest included, highest excluded
JAXLIB_RANGE: tuple[tuple[int, ...], tuple[int, ...]] = ((0, 10, 2), (0, 13))
_RANGE_TEXT = "jaxlib>=0.10.2,<0.13"
_PROTOCOL = 1
#: seconds one run in the other environment may take (starting it, compiling, running) by default
DEFAULT_TIMEOUT = 600.0

# Runs first in the other environment (python -c): its versions from package metadata, the jaxlib
# range checked before anything of xlasdk (or jaxlib) is imported, then the worker.
_BOOTSTRAP = r"""
import importlib.metadata as m, json, os, platform, re, sys
d = sys.argv[1]
def v(name):
    try:
        return m.version(name)
    except Exception:
        return None
info = {"protocol": __PROTOCOL__, "python": platform.python_version(), "executable": sys.executable,
        "jaxlib": v("jaxlib"), "libtpu": v("libtpu"), "numpy": v("numpy"), "ml_dtypes": v("ml_dtypes")}
def answer(doc):
    with open(os.path.join(d, "result.json.tmp"), "w") as f:
        json.dump(doc, f)
    os.replace(os.path.join(d, "result.json.tmp"), os.path.join(d, "result.json"))
with open(os.path.join(d, "request.json")) as f:
    req = json.load(f)
info["token"] = req["token"]
if req.get("probe"):
    answer(info); sys.exit(0)
missing = [k for k in ("jaxlib", "numpy", "ml_dtypes") if info[k] is None]
lo, hi = __RANGE__
nums = tuple(int(x) for x in re.findall(r"\d+", re.match(r"[\d.]*", info["jaxlib"] or "")[0]))
if missing or not (lo <= nums < hi):
    answer(info); sys.exit(0)
from xlasdk.reference._env_worker import main
sys.exit(main(d, info))
""".replace("__PROTOCOL__", str(_PROTOCOL)).replace("__RANGE__", f"{JAXLIB_RANGE[0]!r}, {JAXLIB_RANGE[1]!r}")


def in_range(version: str | None) -> bool:
    """Whether a jaxlib version string is in xlasdk's range (:data:`JAXLIB_RANGE`); its leading
    numbers are read (``0.12.0.1``; ``0.13.0.dev1`` is out)."""
    import re

    if not version:
        return False
    head = re.match(r"[\d.]*", version)
    nums = tuple(int(x) for x in re.findall(r"\d+", head[0] if head else ""))
    return bool(nums) and JAXLIB_RANGE[0] <= nums < JAXLIB_RANGE[1]


@dataclass(frozen=True)
class EnvironmentVersions:
    """One environment's versions: Python's, jaxlib's, libtpu's (None where not used), and the
    interpreter that ran (its path)."""

    python: str
    jaxlib: str
    libtpu: str | None
    executable: str

    def __str__(self) -> str:
        return f"jaxlib {self.jaxlib}" + (f", libtpu {self.libtpu}" if self.libtpu else "") + f", Python {self.python}"

    def as_dict(self) -> dict[str, Any]:
        return {"python": self.python, "jaxlib": self.jaxlib, "libtpu": self.libtpu, "executable": self.executable}


def this_environment(platform: str = "cpu") -> EnvironmentVersions:
    """This process's versions (libtpu only when ``platform`` is ``"tpu"``)."""
    import importlib.metadata
    import platform as _platform

    from .._jaxlib.versions import jaxlib_version

    libtpu = None
    if platform == "tpu":
        try:
            libtpu = importlib.metadata.version("libtpu")
        except importlib.metadata.PackageNotFoundError:
            libtpu = None
    return EnvironmentVersions(_platform.python_version(), jaxlib_version(), libtpu, sys.executable)


@dataclass(frozen=True)
class _Answer:
    """What one run in the other environment gave: its versions, and its outputs or XLA's error."""

    versions: EnvironmentVersions
    outputs: list[np.ndarray[Any, Any]] | None
    error: str | None
    text: str | None = None  # the optimized HLO, for an "optimized" request


class OtherEnvironment(Reference):
    """The same module compiled and run under another Python environment (``python``: its
    interpreter, or a wrapper that behaves as one), on the same platform as this side's device, with
    the same XLA options; each output within the device kind's error bounds of both runs (each
    release's value within its bound of the exact one), or exactly where ``rtol=0, atol=0``.

    ``versions`` and ``here`` (after the comparison) are each side's :class:`EnvironmentVersions`;
    the report's ``against`` names both. ``timeout``: seconds each run there may take.
    ``bisect="ops"``: the first instruction whose value differs between the two environments on
    agreeing operands, or, where exposing the values hides the difference, the instruction from
    which the module cut there still differs (compiled together with what follows it);
    ``bisect="passes"``: the passes whose disabling, on the side that leaves the reference, removes
    the difference, and the passes one release ran and the other did not.

    Raises
    ------
    OtherEnvironmentError
        When the comparison runs: see the class.
    """

    bisect_modes: ClassVar[frozenset[str]] = frozenset({"ops", "passes"})

    def __init__(self, python: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT, name: str | None = None,
                 ) -> None:
        from .._numbers import TOLERANCE
        from ..errors import CompareArgumentError

        self.python = os.fspath(python)
        self.timeout = TOLERANCE.check(timeout, "OtherEnvironment: timeout", CompareArgumentError)
        self.name = name
        self.versions: EnvironmentVersions | None = None
        self.here: EnvironmentVersions | None = None
        self.runs = 0

    @property
    def source(self) -> Any:
        return self.python

    @property
    def label(self) -> str:
        who = self.name or f"python {self.python}"
        if self.versions is None:
            return who
        here = f"; here {self.here}" if self.here is not None else ""
        return f"{who} ({self.versions}{here})"

    def probe(self) -> EnvironmentVersions:
        """The other environment's versions, checked (jaxlib in range, numpy and ml_dtypes there),
        without compiling anything.

        Raises OtherEnvironmentError as the class says."""
        return self._call({"probe": True}, [], "").versions

    def expected(self, computation: XlaComputation, args: Sequence[Any], got: Sequence[np.ndarray[Any, Any]],
                 settings: CompareSettings) -> Expected:
        a = self.run(computation, args, settings, self.overrides(settings))
        if a.error is not None:
            raise OtherEnvironmentError(f"{self.label}: XLA could not compile or run {computation.name!r} there: "
                                        f"{a.error}")
        assert a.outputs is not None
        want = given_outputs(got, a.outputs, self.label)
        return want, self.scales(computation, args, settings, len(want))

    def scales(self, computation: XlaComputation, args: Sequence[Any], settings: CompareSettings, n: int
               ) -> list[Any]:
        """The scales the ``n`` outputs of ``computation`` on ``args`` are judged by (each release's
        value within its device's error model of the exact one: the bounds doubled)."""
        return [_twice(s) for s in both_models(computation, args, self.models(computation, settings),
                                               settings.precision, n)]

    def models(self, computation: XlaComputation, settings: CompareSettings) -> list[DeviceKind]:
        return [settings.kind]

    def overrides(self, settings: CompareSettings) -> dict[str, Any]:
        """The XLA options both sides compile with (this runner's, then the settings' ``xla_flags``)."""
        return {**self.device_overrides(), **settings.xla_flags}

    def bisect_ops(self, bisector: OpsBisector) -> Any:
        from ._against import compare_programs
        from ._bisect_core import OpsBisection

        if bisector.report.ok:
            return OpsBisection("no divergence")
        s = bisector.settings
        pb = _Program(bisector.computation, bisector.args, s, bisector.options, need_reference=False)
        pg = _ThereProgram(self, bisector.computation, bisector.args, s, self.overrides(s))
        found = compare_programs(pb, pg)
        found.note = (f"{found.note}; " if found.note else "") + (
            f"between this environment and {self.label}: the same module, every value exposed on both sides")
        if found.status != "not localised":
            return found
        # exposing the values may hide the difference (XLA fuses or rewrites instructions together only
        # where the value between them is no output): the module cut the other way, from an instruction on
        from ._bisect_env_suffix import HereSide, bisect_suffixes

        s.say("bisect ops: not localised with every value exposed; searching the module's suffixes")
        suffix = bisect_suffixes(bisector.computation, bisector.args, s, HereSide(pb.device, bisector.options),
                                 EnvSide(self, s, self.overrides(s)),
                                 scales=lambda comp, args, n: self.scales(comp, args, s, n))
        suffix.compiles += found.compiles
        suffix.note = f"{suffix.note}\nwith every value exposed first: {found.note}"
        return suffix

    def optimized_hlo(self, computation: XlaComputation, topology: str | None,
                      overrides: Mapping[str, Any] | None = None) -> str:
        """The optimized HLO XLA makes of ``computation`` there: for one device of the TPU
        ``topology`` without a chip (``"v5e:1x1"``: that environment's libtpu), or for the CPU
        (None), with the XLA options ``overrides``.

        Raises
        ------
        OtherEnvironmentError
            As the class says, and XLA's refusal there (its message quoted)."""
        platform = "cpu" if topology is None else "tpu"
        if self.here is None:
            self.here = this_environment(platform)
        a = self._call({"optimized": topology or "cpu", "overrides": dict(overrides or {}), "device": None}, [],
                       computation.as_hlo_text(), platform)
        if a.error is not None:
            raise OtherEnvironmentError(f"{self.label}: XLA could not compile {computation.name!r} for "
                                        f"{topology or 'the CPU'} there: {a.error}")
        assert a.text is not None
        return a.text

    def bisect_passes(self, bisector: OpsBisector, want: Sequence[np.ndarray[Any, Any]], scales: Sequence[Any]
                      ) -> Any:
        """``bisect="passes"`` between the environments (:func:`._bisect_passes_env.bisect_passes_between`):
        on the side whose outputs leave the device's model of the reference, and the passes one
        release's compile ran and the other's did not."""
        from ._bisect_passes_env import bisect_passes_between

        return bisect_passes_between(self, bisector, want, scales)

    # -- the subprocess
    def run(self, computation: XlaComputation, args: Sequence[Any], settings: CompareSettings,
            overrides: Mapping[str, Any]) -> _Answer:
        """``computation`` compiled and run there on ``args`` (on this side's device's platform and
        id), with ``overrides``: its outputs, or XLA's error there."""
        from ._walk import dtype_of

        device = settings.device_to_run()
        if self.here is None:
            self.here = this_environment(device.platform)
        params = computation.instruction_graph().params
        inputs = [np.asarray(a).astype(dtype_of(p.shape), copy=False) for a, p in zip(args, params, strict=True)]
        text = computation.as_hlo_text()
        return self._call({"overrides": dict(overrides), "device": f"{device.platform}:{device.id}"}, inputs, text,
                          device.platform)

    def _call(self, request: dict[str, Any], inputs: Sequence[np.ndarray[Any, Any]], module_text: str,
              platform: str = "cpu") -> _Answer:
        from ._env_worker import pack, unpack

        token = secrets.token_hex(16)
        directory = tempfile.mkdtemp(prefix="xlasdk-env-")  # mode 0700: this user's alone
        try:
            blobs, rows = pack(list(inputs))
            np.savez(os.path.join(directory, "inputs.npz"), **blobs)
            with open(os.path.join(directory, "module.hlo"), "w") as f:
                f.write(module_text)
            with open(os.path.join(directory, "request.json"), "w") as f:
                json.dump({**request, "token": token, "module": "module.hlo", "inputs": rows}, f)
            self.runs += 1
            self._start(directory)
            doc = self._result(directory, token)
            versions = self._versions(doc, platform)
            if doc.get("error") is not None:
                return _Answer(versions, None, str(doc["error"]))
            if request.get("probe"):
                return _Answer(versions, None, None)
            if request.get("optimized"):
                try:
                    with open(os.path.join(directory, str(doc["optimized"]))) as f:
                        return _Answer(versions, None, None, f.read())
                except (OSError, KeyError, UnicodeDecodeError) as e:
                    raise OtherEnvironmentError(f"{self._who()}: its optimized HLO could not be read "
                                                f"({type(e).__name__})") from None
            try:
                outs = unpack(os.path.join(directory, "outputs.npz"), list(doc["outputs"]))
            except Exception as e:  # noqa: BLE001 - anything unreadable there is no answer
                raise OtherEnvironmentError(f"{self._who()}: its outputs could not be read ({type(e).__name__}: "
                                            f"{str(e)[:200]})") from None
            return _Answer(versions, outs, None)
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    def _who(self) -> str:
        return self.name or f"python {self.python}"

    def _start(self, directory: str) -> None:
        env = dict(os.environ)
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # xlasdk's parent
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), here) if p)
        try:
            proc = subprocess.run([self.python, "-c", _BOOTSTRAP, directory], cwd=directory, env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            raise OtherEnvironmentError(f"{self._who()}: ran past its {self.timeout:g} s (killed); no answer") from None
        except OSError as e:
            raise OtherEnvironmentError(f"{self._who()}: cannot be started ({e.strerror or e}): expected a Python "
                                        "interpreter (or a wrapper that execs one)") from None
        if proc.returncode != 0:
            tail = " ".join(proc.stderr.decode(errors="replace").split())[-600:]
            how = f"was killed by signal {-proc.returncode}" if proc.returncode < 0 else \
                f"exited with code {proc.returncode}"
            raise OtherEnvironmentError(f"{self._who()}: {how} before it answered"
                                        + (f": {tail}" if tail else ""))

    def _result(self, directory: str, token: str) -> dict[str, Any]:
        path = os.path.join(directory, "result.json")
        try:
            with open(path) as f:
                doc = json.load(f)
        except FileNotFoundError:
            raise OtherEnvironmentError(f"{self._who()}: exited without answering: expected a Python interpreter "
                                        "(or a wrapper that execs one) that runs the code it is given") from None
        except (OSError, ValueError) as e:
            raise OtherEnvironmentError(f"{self._who()}: its answer is unreadable ({type(e).__name__})") from None
        if not isinstance(doc, dict) or doc.get("protocol") != _PROTOCOL or doc.get("token") != token:
            raise OtherEnvironmentError(f"{self._who()}: answered with something else than xlasdk's worker's result "
                                        "for this request")
        return doc

    def _versions(self, doc: dict[str, Any], platform: str) -> EnvironmentVersions:
        missing = [k for k in ("jaxlib", "numpy", "ml_dtypes") if not doc.get(k)]
        if missing:
            raise OtherEnvironmentError(f"{self._who()}: has no {', '.join(missing)} (Python {doc.get('python')}): "
                                        f"expected an environment with {_RANGE_TEXT}, numpy and ml_dtypes")
        if not in_range(str(doc["jaxlib"])):
            raise OtherEnvironmentError(f"{self._who()}: has jaxlib {doc['jaxlib']}: xlasdk supports {_RANGE_TEXT}")
        v = EnvironmentVersions(str(doc.get("python")), str(doc["jaxlib"]),
                                str(doc["libtpu"]) if platform == "tpu" and doc.get("libtpu") else None,
                                str(doc.get("executable")))
        self.versions = v
        return v


def _twice(scale: Any) -> Any:
    """An output's scale with its carried bound doubled: each release's value may be that far from
    the exact one."""
    from ._bounds import OutputScale

    if isinstance(scale, OutputScale) and scale.bound is not None:
        return OutputScale(float(scale), 2.0 * scale.bound, scale.modeled, scale.exact)
    return scale


class _ThereProgram(_Program, RunsElsewhere):
    """The other environment's side of ``bisect="ops"``: a ``_Program`` (its graph, slots and
    arguments) whose runs happen there."""

    def __init__(self, env: OtherEnvironment, comp: XlaComputation, args: Sequence[Any], settings: CompareSettings,
                 overrides: Mapping[str, Any]) -> None:
        super().__init__(comp, args, settings, None, need_reference=False)
        self.env = env
        self.overrides = dict(overrides)

    def run(self, nodes: Sequence[XlaOp]) -> list[np.ndarray[Any, Any]]:
        self.compiles += 1
        a = self.env.run(self.comp.with_outputs(list(nodes)), self.args, self.settings, self.overrides)
        if a.error is not None:
            raise _CutFailed(f"in {self.env.label}: {a.error[:300]}")
        assert a.outputs is not None
        return a.outputs

    def region_runner(self, comp: XlaComputation) -> Callable[[Sequence[Any]], list[np.ndarray[Any, Any]]]:
        """``comp`` (a region's program) run there, one run of the worker per call."""
        self.compiles += 1

        def run(args: Sequence[Any]) -> list[np.ndarray[Any, Any]]:
            a = self.env.run(comp, args, self.settings, self.overrides)
            if a.error is not None:
                raise _CutFailed(f"in {self.env.label}: {a.error[:300]}")
            assert a.outputs is not None
            return a.outputs

        return run

    def side(self, comp: XlaComputation, args: Sequence[Any]) -> _Program:
        """``comp`` on ``args`` run there: this side of a pair of region programs."""
        return _ThereProgram(self.env, comp, args, self.settings, self.overrides)


class EnvSide:
    """The other environment as a side of ``bisect="ops"``'s suffix cuts
    (:class:`~._bisect_env_suffix.Side`): each run one run of its worker, with the XLA options
    ``overrides``."""

    def __init__(self, env: OtherEnvironment, settings: CompareSettings, overrides: Mapping[str, Any]) -> None:
        self.env = env
        self.settings = settings
        self.overrides = dict(overrides)

    @property
    def label(self) -> str:
        return self.env.label

    def run(self, comp: XlaComputation, args: Sequence[np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
        a = self.env.run(comp, args, self.settings, self.overrides)
        if a.error is not None:
            raise _CutFailed(f"in {self.env.label}: {a.error[:300]}")
        assert a.outputs is not None
        return list(a.outputs)

    def optimized(self, comp: XlaComputation) -> str | None:
        """The optimized HLO XLA makes of ``comp`` there, for the CPU; None on another platform."""
        if self.settings.device_to_run().platform != "cpu":
            return None
        return self.env.optimized_hlo(comp, None, self.overrides)


def compare_optimized_hlo(computation: Any, other: Any, *, topology: str | None = None,
                          xla_flags: dict[str, Any] | None = None) -> OptimizedDiff:
    """The optimized HLO of ``computation`` here and in ``other`` (an :class:`~xlasdk.OtherEnvironment`:
    another jaxlib / libtpu release), compiled for one device of the TPU ``topology`` without a chip
    (``"v5e:1x1"``) or for the CPU (None), with the XLA options ``xla_flags`` on both sides, compared
    instruction by instruction (:func:`~xlasdk.reference._optimized_diff.diff_optimized`).

    Raises
    ------
    CompileError
        XLA refuses (or aborts on) the module here.
    OtherEnvironmentError
        No answer from the other environment, or XLA's refusal there.
    XlaSdkError
        An unknown topology; an optimized text that cannot be read.
    """
    from ._optimized_diff import diff_optimized, optimized_hlo_here, parse_optimized

    platform = "cpu" if topology is None else "tpu"
    text_here = optimized_hlo_here(computation, topology, xla_flags)
    text_there = other.optimized_hlo(computation, topology, xla_flags or {})
    here_v = this_environment(platform)
    there_v = other.versions
    return diff_optimized(parse_optimized(text_here, "the optimized HLO here"),
                          parse_optimized(text_there, f"the optimized HLO of {other.label}"),
                          here_name=f"this environment ({here_v})",
                          there_name=f"{other.name or 'python ' + str(other.python)} ({there_v})",
                          target=topology or "cpu")
