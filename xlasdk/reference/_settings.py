"""compare's settings as one record (:class:`CompareSettings`), as XLA's ``run_hlo_module`` takes its
options: where the program runs, how its values are judged, what the device side compiles with.

:func:`~xlasdk.compare` reads them once, from its keywords or from ``settings=``, and hands the
record to the runners (:mod:`._runners`) and the bisections (:mod:`xlasdk.reference.bisect`), which
take ``(comp, args, settings)``: each field is checked, and the device resolved, when the record is
made, never again down the line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from .._numbers import COUNT, TOLERANCE
from ..errors import CompareArgumentError, ToleranceError
from ._precision import DEVICE_KINDS, DeviceKind, checked_precision, device_kind_of
from ._precision import device_kind as named_kind

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..runtime import CompileOptions
    from ..runtime._options import OptionValue
    from ..runtime.device import Device

    #: What a device argument takes: a :class:`~xlasdk.Device`, a ``"cpu:0"``-style name, an int id
    #: of the default platform, or None for the default device.
    DeviceLike = Device | str | int | None

__all__ = ["CompareSettings", "resolve_device", "refuse_both", "DEFAULT_MAX_TRIALS"]

#: The most trial compiles of one pass bisection (``bisect="passes"``), unless told
#: (``max_trials``, ``--max-trials``).
DEFAULT_MAX_TRIALS = 200


def resolve_device(device: DeviceLike) -> Device:
    """The :class:`~xlasdk.Device` that ``device`` names (None: the default device).

    Raises
    ------
    UnknownDeviceError
        An unknown platform or device id, or a value of another type.
    """
    from ..runtime.device import _resolve_device  # the runtime (a PJRT client) loads with the first device

    return _resolve_device(device)


@dataclass(frozen=True, eq=False, init=False)
class CompareSettings:
    """The settings of :func:`~xlasdk.compare` as one record, checked once when it is made.

    ``compare(comp, args, settings=s)`` is ``compare(comp, args, device=..., rtol=..., ...)`` with the
    same values; the bisections (:func:`xlasdk.bisect.bisect_ops`, ``bisect_passes``,
    ``find_nonfinite``, ``local_divergences``) take one too. What to compare against
    (``against=``) and which searches to run (``bisect=``, ``find_nonfinite=``) stay compare's
    own arguments. A changed copy: ``dataclasses.replace(s, rtol=0.0)`` (checked again). Records
    compare by identity (they may hold arrays and a callback).

    Parameters
    ----------
    device: where XLA runs the program: a :class:`~xlasdk.Device`, a ``"cpu:0"``-style name, an int
        id or None (the default device), resolved here to a Device. With ``outputs`` nothing runs
        here and ``device`` is None (a device given is not used, as compare never used it).
    rtol, atol, ulps: the tolerances (None: the default of each; see :func:`~xlasdk.compare`).
    excess_precision: against the reference, XLA compiles with its excess precision (else each
        bf16/f16 op rounded, as the reference rounds it).
    xla_flags: XLA ``DebugOptions`` fields for the device side's compile, over xlasdk's own; kept as
        a read-only mapping (XLA checks the names when it compiles).
    device_kind: whose error model judges each op (``"cpu"``, ``"gpu"``, ``"tpu-v5e"``, ... or a
        :class:`~xlasdk.reference._precision.DeviceKind`); None: the device's (:attr:`kind`).
    precision: ``"highest"``, ``"high"`` or ``"default"``: every dot and convolution compiled, and
        judged, at that precision; None: as the program says.
    outputs: outputs recorded on a device of ``device_kind`` (no local run), as a tuple.
    progress: called with a line of text per step of a bisection or of the op-by-op judgment.
    max_trials: the most trial compiles of a pass bisection (``bisect="passes"``; an integer >= 1,
        default :data:`DEFAULT_MAX_TRIALS`): the search stops there and says so.

    Raises
    ------
    ToleranceError
        A tolerance that is not a finite number >= 0 (``compare: rtol must be ...``).
    CompareArgumentError
        A device kind or precision that is not known; ``max_trials`` that is not an integer >= 1.
    UnknownDeviceError
        A device that is not known.
    """

    device: Device | None
    rtol: float | None
    atol: float | None
    ulps: float | None
    excess_precision: bool
    xla_flags: Mapping[str, OptionValue]
    device_kind: DeviceKind | None
    precision: str | None
    outputs: tuple[ArrayLike, ...] | None = field(repr=False)
    progress: Callable[[str], None] | None
    max_trials: int

    def __init__(
        self,
        *,
        device: DeviceLike = None,
        rtol: float | None = None,
        atol: float | None = None,
        ulps: float | None = None,
        excess_precision: bool = False,
        xla_flags: Mapping[str, OptionValue] | None = None,
        device_kind: str | DeviceKind | None = None,
        precision: str | None = None,
        outputs: Sequence[ArrayLike] | None = None,
        progress: Callable[[str], None] | None = None,
        max_trials: int = DEFAULT_MAX_TRIALS,
    ) -> None:
        def tolerance(name: str, value: float | None) -> float | None:
            return None if value is None else TOLERANCE.check(value, f"compare: {name}", ToleranceError)

        put = object.__setattr__  # frozen: each field set once, here
        put(self, "rtol", tolerance("rtol", rtol))
        put(self, "atol", tolerance("atol", atol))
        put(self, "ulps", tolerance("ulps", ulps))
        put(self, "device_kind", None if device_kind is None else named_kind(device_kind))
        put(self, "precision", None if precision is None else checked_precision(precision))
        put(self, "excess_precision", bool(excess_precision))
        put(self, "xla_flags", MappingProxyType(dict(xla_flags or {})))
        put(self, "outputs", None if outputs is None else tuple(outputs))
        put(self, "progress", progress)
        put(self, "max_trials", COUNT.check(max_trials, "compare: max_trials", CompareArgumentError))
        # recorded outputs: nothing runs here, and no client is started for them
        put(self, "device", None if outputs is not None else resolve_device(device))

    @property
    def kind(self) -> DeviceKind:
        """The device kind whose error model judges each op: :attr:`device_kind` when named, else
        the device's (the CPU's for recorded outputs of an unnamed kind)."""
        if self.device_kind is not None:
            return self.device_kind
        return device_kind_of(self.device) if self.device is not None else DEVICE_KINDS["cpu"]

    def device_to_run(self) -> Device:
        """The device the program runs on.

        Raises CompareArgumentError for settings of recorded outputs: nothing runs on a device
        (a bisection needs one)."""
        if self.device is None:
            raise CompareArgumentError("compare: settings with outputs= (recorded elsewhere) run nothing on a "
                                       "device: there is nothing to bisect")
        return self.device

    def flag_options(self) -> CompileOptions | None:
        """:attr:`xla_flags` as compile options (None when there are none): what a bisection given
        settings and no ``options`` compiles with."""
        from ..runtime import CompileOptions  # the runtime (a PJRT client) loads with the first device

        return CompileOptions(env_option_overrides=self.xla_flags) if self.xla_flags else None

    def say(self, line: str) -> None:
        """Hand ``line`` to :attr:`progress`, when there is one."""
        if self.progress is not None:
            self.progress(line)


def refuse_both(where: str, settings: CompareSettings | None, **keywords: object) -> None:
    """A CompareArgumentError when ``settings`` is given together with any of ``keywords`` (those not
    None or False): a setting is given once, in the record or as a keyword."""
    given = [name for name, value in keywords.items() if value is not None and value is not False]
    if settings is not None and given:
        names = ", ".join(f"{n}=" for n in given)
        raise CompareArgumentError(
            f"{where}: settings= and {names} given together: give each setting once, in the settings "
            f"(dataclasses.replace(settings, {given[0]}=...)) or as a keyword")
