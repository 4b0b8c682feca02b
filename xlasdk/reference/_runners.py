"""What :func:`~xlasdk.reference.compare` compares a device's outputs against: one runner per kind
(:class:`Reference`), as XLA's ``run_hlo_module`` treats its reference platform.

- :class:`ReferenceEvaluator`: the reference evaluator on the same program (``against="reference"``);
- :class:`OtherDevice`: XLA on another device (``against="cpu:0"`` or a :class:`~xlasdk.Device`);
- :class:`GivenOutputs`: outputs computed elsewhere (a list of arrays; the CLI's ``--against
  recorded`` and ``--against OUT.npz``);
- :class:`SecondModule`: a second module that computes what this one should.

Each knows the report's text for it (``label``), how to produce the expected outputs and the error
scales they are judged by (``expected``, following the error models of ``models``), the XLA options
the device side compiles with against it (``device_overrides``, ``device_options``) and which
bisections it supports (``bisect_modes``, ``bisect_ops``). :func:`reference_for` reads ``against``
once: the only place that asks what kind of value it is. Each takes compare's settings as one
record (:class:`~xlasdk.reference._settings.CompareSettings`).

The device side is :func:`run_against`: the program run on the settings' device with the runner's
options, and its outputs compared with what the runner expects (:class:`Comparison`).
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from ..errors import CompareArgumentError, XlaSdkError
from ._evaluator import run_reference
from ._precision import DeviceKind, device_kind, device_kind_of, set_precision
from ._precision_notes import precision_notes
from ._report import STRICT_PRECISION, CompareReport, compare_one
from ._settings import CompareSettings, resolve_device
from ._walk import UnsupportedOpError

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ..runtime import CompileOptions
    from ..runtime.device import Device
    from ._settings import DeviceLike

__all__ = ["Reference", "ReferenceEvaluator", "OtherDevice", "GivenOutputs", "SecondModule", "OpsBisector",
           "Comparison", "run_against", "run_on", "reference_for", "both_models", "module_kinds",
           "given_outputs", "evaluate_as"]

Expected = tuple[list[np.ndarray[Any, Any]], list[Any]]


class OpsBisector(Protocol):
    """The ``bisect="ops"`` strategies :func:`~xlasdk.reference.compare` offers; a runner picks its
    own (:meth:`Reference.bisect_ops`). They live with compare, above the bisections, which compare
    again."""

    # the comparison they start from (a runner with its own search, as
    # :class:`~._other_env.OtherEnvironment`, reads it): the program as it ran, its arguments, the
    # report, the settings and the options the device side compiled with
    computation: XlaComputation
    args: Sequence[Any]
    report: CompareReport
    settings: CompareSettings
    options: CompileOptions | None

    def against_evaluator(self) -> Any:
        """The first op that leaves the reference evaluator's bound, on this program."""

    def against_device(self, label: str) -> Any:
        """Against another device (``label``): each op judged by the device's own error model."""

    def against_module(self, module: XlaComputation) -> Any:
        """The first instruction that departs from its match in ``module`` on agreeing values."""


class Reference(abc.ABC):
    """What compare compares against.

    ``label`` is the report's text for it; ``source`` what the caller gave (named in errors);
    ``bisect_modes`` the ``bisect=`` values it supports; ``evaluates``: the expected values are the
    reference evaluator's on this same program (its precision notes, the op-by-op judgment and
    ``outputs=`` recorded elsewhere apply).
    """

    bisect_modes: ClassVar[frozenset[str]] = frozenset()
    evaluates: ClassVar[bool] = False

    @property
    @abc.abstractmethod
    def label(self) -> str:
        """The report's text for what the outputs were compared against."""

    @property
    @abc.abstractmethod
    def source(self) -> Any:
        """What the caller gave (named in errors)."""

    def device_overrides(self) -> dict[str, Any]:
        """XLA ``DebugOptions`` fields the device side compiles with against this (before ``xla_flags``)."""
        return {}

    def device_options(self, settings: CompareSettings) -> CompileOptions | None:
        """What the device side compiles with against this: :meth:`device_overrides`, then the
        settings' ``xla_flags`` over them (None when both are empty)."""
        from ..runtime import CompileOptions

        overrides = {**self.device_overrides(), **settings.xla_flags}
        return CompileOptions(env_option_overrides=overrides) if overrides else None

    @abc.abstractmethod
    def expected(self, computation: XlaComputation, args: Sequence[Any], got: Sequence[np.ndarray[Any, Any]],
                 settings: CompareSettings) -> Expected:
        """The outputs ``got`` (the device's, compiled with :meth:`device_options`) should match, and per
        output the error scale they are judged by (0.0: the default tolerances).

        Raises
        ------
        UnsupportedOpError
            The reference evaluator cannot evaluate the program.
        CompareArgumentError
            Outputs of another number, shape or element type than ``got``.
        """

    @abc.abstractmethod
    def models(self, computation: XlaComputation, settings: CompareSettings) -> list[DeviceKind]:
        """The device kinds whose error models the scales follow (``settings.kind``: the device's, or the
        one named, among them)."""

    def bisect_ops(self, bisector: OpsBisector) -> Any:
        """``bisect="ops"`` against this: an :class:`~xlasdk.reference.bisect.OpsBisection`."""
        raise CompareArgumentError(f"compare: bisect='ops' is not supported against {self.label}")

    def bisect_passes(self, bisector: OpsBisector, want: Sequence[np.ndarray[Any, Any]], scales: Sequence[Any]
                      ) -> Any:
        """``bisect="passes"`` against this (``want``, ``scales``: the expected outputs and their
        scales): a :class:`~xlasdk.reference.bisect.PassBisection`; by default the passes of this
        side's compile whose disabling makes its outputs match ``want``."""
        from ._bisect_passes import bisect_passes

        return bisect_passes(bisector.computation, bisector.args, want, scales, options=bisector.options,
                             settings=bisector.settings)


class ReferenceEvaluator(Reference):
    """The reference evaluator on the same program (``against="reference"``). The device side compiles
    each bf16/f16 op rounded, as the evaluator rounds it, unless ``excess_precision``."""

    bisect_modes: ClassVar[frozenset[str]] = frozenset({"ops", "passes"})
    evaluates: ClassVar[bool] = True

    def __init__(self, excess_precision: bool = False) -> None:
        self.excess_precision = excess_precision

    @property
    def source(self) -> Any:
        return "reference"

    @property
    def label(self) -> str:
        return "reference evaluator" + (" (XLA with excess precision)" if self.excess_precision else
                                        " (XLA without excess precision)")

    def device_overrides(self) -> dict[str, Any]:
        # excess_precision: XLA's default said outright (an optimized dump would otherwise compile without it)
        return dict(STRICT_PRECISION) if not self.excess_precision else {k: True for k, _ in STRICT_PRECISION}

    def expected(self, computation: XlaComputation, args: Sequence[Any], got: Sequence[np.ndarray[Any, Any]],
                 settings: CompareSettings) -> Expected:
        return evaluate_as(computation, args, settings.kind, settings.precision, emulated=False)

    def models(self, computation: XlaComputation, settings: CompareSettings) -> list[DeviceKind]:
        return [settings.kind]

    def bisect_ops(self, bisector: OpsBisector) -> Any:
        return bisector.against_evaluator()


class OtherDevice(Reference):
    """XLA on another device (a :class:`~xlasdk.Device`, a ``"cpu:0"``-style name, an int id, None for
    the default device); each output within both devices' error bounds together, where the reference
    can evaluate it."""

    bisect_modes: ClassVar[frozenset[str]] = frozenset({"ops"})

    def __init__(self, device: DeviceLike) -> None:
        self.device = device

    @functools.cached_property
    def resolved(self) -> Device:
        """The device it names, resolved when first needed (UnknownDeviceError for none)."""
        return resolve_device(self.device)

    @property
    def label(self) -> str:
        return str(self.device)

    @property
    def source(self) -> Any:
        return self.device

    def expected(self, computation: XlaComputation, args: Sequence[Any], got: Sequence[np.ndarray[Any, Any]],
                 settings: CompareSettings) -> Expected:
        want = run_on(computation, args, self.resolved, None)
        return want, both_models(computation, args, self.models(computation, settings), settings.precision,
                                 len(want))

    def models(self, computation: XlaComputation, settings: CompareSettings) -> list[DeviceKind]:
        kind = settings.kind
        try:
            other_kind = device_kind_of(self.resolved)
        except Exception:  # noqa: BLE001 - compiled and ran on it: its kind only decides the bounds
            other_kind = kind
        return [kind, other_kind]

    def bisect_ops(self, bisector: OpsBisector) -> Any:
        return bisector.against_device(self.label)


class GivenOutputs(Reference):
    """Outputs computed elsewhere, of the program's output shapes and element types: ``label`` names
    them in the report (the CLI's recorded result or .npz); errors speak of "given" outputs."""

    def __init__(self, outputs: Sequence[Any], label: str = "given outputs") -> None:
        self.outputs = outputs
        self._label = label

    @property
    def label(self) -> str:
        return self._label

    @property
    def source(self) -> Any:
        return self.outputs

    def expected(self, computation: XlaComputation, args: Sequence[Any], got: Sequence[np.ndarray[Any, Any]],
                 settings: CompareSettings) -> Expected:
        return given_outputs(got, self.outputs), [0.0] * len(got)

    def models(self, computation: XlaComputation, settings: CompareSettings) -> list[DeviceKind]:
        return []  # nothing known of where they were computed: the default tolerances


class SecondModule(Reference):
    """A second module that computes what this one should, run on the same device with the same
    options; ``bisect="ops"`` matches the two instruction by instruction (:mod:`._against`)."""

    bisect_modes: ClassVar[frozenset[str]] = frozenset({"ops"})

    def __init__(self, module: XlaComputation) -> None:
        self.module = module

    @property
    def label(self) -> str:
        return f"module {self.module.name!r}"

    @property
    def source(self) -> Any:
        return self.module

    def expected(self, computation: XlaComputation, args: Sequence[Any], got: Sequence[np.ndarray[Any, Any]],
                 settings: CompareSettings) -> Expected:
        want = given_outputs(got, run_on(self.module, args, settings.device_to_run(), self.device_options(settings)),
                             self.label)
        return want, both_models(self.module, args, self.models(computation, settings), settings.precision,
                                 len(want))

    def models(self, computation: XlaComputation, settings: CompareSettings) -> list[DeviceKind]:
        return module_kinds(computation, settings.kind, settings.device_to_run())

    def bisect_ops(self, bisector: OpsBisector) -> Any:
        return bisector.against_module(self.module)


def reference_for(against: Any, *, excess_precision: bool = False) -> Reference:
    """The runner for compare's ``against``: ``"reference"``, a device (a :class:`~xlasdk.Device`, a
    ``"cpu:0"``-style name, an int id, None for the default device), a list or tuple of outputs, a
    second module (anything with an ``instruction_graph``), or a :class:`Reference` (returned as is,
    with its own settings: the CLI names recorded outputs so, ``GivenOutputs(values, "the recorded
    result")``).

    Raises
    ------
    UnknownDeviceError
        A value of another type.
    """
    from ..runtime.device import Device, UnknownDeviceError

    if isinstance(against, Reference):
        return against
    if isinstance(against, str) and against == "reference":
        return ReferenceEvaluator(excess_precision)
    if isinstance(against, (list, tuple)):
        return GivenOutputs(against)
    if hasattr(against, "instruction_graph"):  # a second module that computes what this one should
        return SecondModule(against)
    if against is None or isinstance(against, (str, Device)) or isinstance(against, int) and not isinstance(
            against, bool):
        return OtherDevice(against)
    raise UnknownDeviceError(f"compare: against must be 'reference', a device (an xs.Device, a 'cpu:0'-style "
                             "name or an int id), a list or tuple of outputs or a second XlaComputation; got "
                             f"{type(against).__name__}")


def evaluate_as(computation: XlaComputation, args: Sequence[Any], kind: DeviceKind, precision: str | None, *,
                emulated: bool) -> Expected:
    """The reference evaluator's outputs and error scales under ``kind``'s model (``emulated``: computing
    as that device does, its DEFAULT-precision f32 dot operands rounded to bf16 on a TPU).

    Raises
    ------
    UnsupportedOpError
        An op without a rule, or a value the evaluator cannot read (never a divergence).
    """
    try:
        return run_reference(computation, args, model=(kind, precision, emulated))
    except XlaSdkError:
        raise
    except Exception as e:  # noqa: BLE001 - a value the evaluator cannot read: never a divergence
        raise UnsupportedOpError(f"reference evaluator: could not evaluate this program ({type(e).__name__}: "
                                 f"{str(e):.200}); it cannot check it") from None


def module_kinds(computation: XlaComputation, kind: DeviceKind, device: Device) -> list[DeviceKind]:
    """The error models a module is judged by against a second module that computes what it should:
    the device both ran on (a resolved one), the kind the user named, and a TPU's where
    ``computation`` is the CPU meaning of a TPU-optimized module (its kept bf16 converts are the
    TPU's DEFAULT precision)."""
    kinds = [kind, device_kind_of(device)]
    if computation.tpu_rewrite is not None:
        kinds.append(device_kind("tpu"))
    return kinds


def both_models(computation: XlaComputation, args: Sequence[Any], kinds: Sequence[Any], precision: str | None,
                n: int) -> list[Any]:
    """Per output, the bounds of the error models of the devices of ``kinds`` added (``--against
    cpu:0`` from a TPU: each may be that far from the exact value), or no bounds (the default
    tolerances) where the reference cannot evaluate the program."""
    from ._bounds import OutputScale

    try:
        per_kind = [run_reference(computation, args, model=(k, precision, False))[1]
                    for k in dict.fromkeys(getattr(k, "name", k) for k in kinds)]
    except Exception:  # noqa: BLE001 - a program the reference cannot read: the default tolerances
        return [0.0] * n
    out: list[Any] = []
    for parts in zip(*per_kind, strict=True):
        bounds: list[np.ndarray[Any, Any]] = [b for b in (getattr(p, "bound", None) for p in parts) if b is not None]
        total = np.asarray(np.sum(bounds, axis=0)) if len(bounds) == len(parts) else None  # 0-d stays an array
        out.append(OutputScale(max(float(p) for p in parts), total, all(getattr(p, "modeled", False) for p in parts)))
    return out


def given_outputs(got: Sequence[np.ndarray[Any, Any]], want: Sequence[Any],
                  label: str | None = None) -> list[np.ndarray[Any, Any]]:
    """``want`` as arrays of ``got``'s shapes and types (raw bytes of the element's size, as numpy
    saves bf16, read as the output's type), or a CompareArgumentError naming ``label`` (None: "given")."""
    w_list = [np.asarray(w) for w in want]
    if len(w_list) != len(got):
        held = f"{len(w_list)} were given" if label is None else f"{label} hold {len(w_list)}"
        raise CompareArgumentError(f"compare: the program has {len(got)} outputs, {held}")
    for k, (g_, w_) in enumerate(zip(got, w_list, strict=True)):
        if w_.dtype != g_.dtype and w_.dtype.kind == "V" and w_.dtype.itemsize == g_.dtype.itemsize:
            w_list[k] = w_ = w_.view(g_.dtype)
        if w_.shape != g_.shape or w_.dtype != g_.dtype:
            where = "given " if label is None else f"{label}: "
            raise CompareArgumentError(f"compare: {where}output {k} is {w_.dtype}{list(w_.shape)}, the program's "
                                       f"output {k} is {g_.dtype}{list(g_.shape)}")
    return w_list


def run_on(computation: XlaComputation, args: Sequence[Any], device: Device,
           options: CompileOptions | None) -> list[np.ndarray[Any, Any]]:
    """``computation``'s outputs on ``device``, compiled with ``options``, as arrays."""
    from ..runtime import compile as _compile

    out = _compile(computation, device, options=options)(*args)
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


@dataclass
class Comparison:
    """What :func:`run_against` found: the report, the program as it ran (at the settings' precision),
    the device's outputs, the values compared against with the evaluator's carried error scales, and
    the options XLA compiled with (the bisections start from them)."""

    report: CompareReport
    computation: XlaComputation
    got: list[np.ndarray[Any, Any]]
    want: list[np.ndarray[Any, Any]]
    scales: list[Any]
    options: CompileOptions | None


def run_against(computation: XlaComputation, args: Sequence[Any], settings: CompareSettings,
                runner: Reference) -> Comparison:
    """:func:`xlasdk.reference.compare` without the bisections: the device side (``computation`` on
    the settings' device, compiled with the runner's options) against ``runner``, or the settings'
    recorded outputs against the reference computing as their device kind does.

    Raises
    ------
    UnsupportedOpError, CompareArgumentError
        As :func:`~xlasdk.reference.compare`.
    """
    if settings.precision is not None:
        computation = set_precision(computation, settings.precision)
    kind = settings.kind
    if settings.outputs is not None:  # values a device recorded elsewhere: the reference computes as it does
        want, scales = evaluate_as(computation, args, kind, settings.precision, emulated=True)
        got = given_outputs(want, settings.outputs, "the recorded outputs")
        report = _report(computation, f"reference evaluator computing as {kind.label} does", got, want, scales,
                         settings)
        report.precision_notes = precision_notes(computation, kind, settings.precision, emulated=True)
        return Comparison(report, computation, got, want, scales, None)
    options = runner.device_options(settings)
    got = run_on(computation, args, settings.device_to_run(), options)
    want, scales = runner.expected(computation, args, got, settings)
    if len(want) != len(got):
        raise CompareArgumentError(f"compare: the program has {len(got)} outputs, {runner.label} gave {len(want)}")
    report = _report(computation, runner.label, got, want, scales, settings)
    if runner.evaluates:
        report.precision_notes = precision_notes(computation, kind, settings.precision)
    return Comparison(report, computation, got, want, scales, options)


def _report(computation: XlaComputation, label: str, got: Sequence[np.ndarray[Any, Any]],
            want: Sequence[np.ndarray[Any, Any]], scales: Sequence[Any], settings: CompareSettings) -> CompareReport:
    s = settings
    report = CompareReport(computation.name, label, [
        compare_one(i, g, w, s.rtol, s.atol, sc, s.ulps) for i, (g, w, sc) in enumerate(zip(got, want, scales,
                                                                                             strict=True))])
    report.device_kind = s.kind.name
    return report
