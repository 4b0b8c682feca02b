"""The checks of xlasdk's numeric arguments and command-line options, in one place.

Each kind of number an API argument or an ``xlasdk`` option takes (a tolerance, a number of
seconds, a seed, a count) is one :class:`Real` or :class:`Integer` here. The API function that
takes it checks it with ``KIND.check(value, "compare: rtol", ToleranceError)``; the option that
reads it from text is declared with ``type=KIND.parse``. Both accept the same values and refuse
the rest with the same words: the argument, what was expected and what came
(``compare: rtol must be a finite number >= 0, got nan — at model.py:42``;
``xlasdk compare: error: argument --rtol: must be a finite number >= 0, got 'nan'``, exit code 2).

What every kind refuses: bools (``True`` is no count), NaN and infinities (a NaN tolerance
matched no element, so a bit-exact program "diverged"; an infinite timeout overflowed Python's
clocks in a background thread), and, for an integer, floats (``seed=1.5``). Numbers of seconds
are at most :data:`MAX_SECONDS`.

A leaf module: the standard library and :mod:`xlasdk.errors`, so that ``xlasdk --help`` and the
command line's usage errors import nothing heavy.
"""

from __future__ import annotations

import math
import numbers
import operator
from dataclasses import dataclass

from ._where import where
from .errors import ToleranceError, XlaSdkError

__all__ = [
    "Real",
    "Integer",
    "MAX_SECONDS",
    "TOLERANCE",
    "SECONDS",
    "SECONDS_OR_NO_LIMIT",
    "SECONDS_OR_NONE",
    "SEED",
    "COUNT",
    "MAX_SEED",
    "tolerances",
]

#: The longest time limit a timeout, time budget or grace period may name: 10**6 s (11.6 days).
#: Python's clocks wait at most ``threading.TIMEOUT_MAX`` (about 9.2e9 s) and ``select``/``poll``
#: at most 2**31 - 1 ms (24.8 days): a larger limit made the wait raise ``OverflowError``
#: (``--timeout 1e10`` was an internal error). No limit at all is spelled as each API says
#: (``None``, or ``0`` for ``xs.compile``), never as ``inf``.
MAX_SECONDS = 1_000_000.0
#: The largest seed of the random inputs: the largest unsigned 64-bit integer.
MAX_SEED = 2**64 - 1


def _text(x: float) -> str:
    """A bound as the messages write it: ``0``, ``1000000``, ``2**64 - 1``, ``0.5``."""
    if isinstance(x, int) and x > 2**20 and (x + 1) & x == 0:
        return f"2**{(x + 1).bit_length() - 1} - 1"
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _shown(value: object) -> str:
    """What came, for a message: a number as Python writes it, anything else with its type; at
    most 60 characters."""
    if isinstance(value, bool):
        text = f"bool {value!r}"
    elif isinstance(value, numbers.Integral):
        text = repr(int(value))  # np.int8(-1) as -1
    elif isinstance(value, numbers.Real):
        try:
            text = repr(float(value))  # np.float32(nan) as nan
        except OverflowError:
            text = repr(value)
    else:
        text = f"{type(value).__name__} {value!r}"
    return text if len(text) <= 60 else text[:57] + "..."


def _given(text: str) -> str:
    """The text of a command-line value, quoted, at most 40 characters."""
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _refuse(message: str) -> Exception:
    """The error an option's ``type=`` raises: argparse prints ``argument --NAME: MESSAGE``."""
    import argparse  # only the command line parses text

    return argparse.ArgumentTypeError(message)


@dataclass(frozen=True)
class Real:
    """A kind of real-number argument: finite, ``>= low`` (``> low`` with ``low_open``) and
    ``<= high``; ints and numpy numbers are taken as floats.

    ``unit`` names what it counts (``"seconds"``), ``note`` what a special value means
    (``"0: no limit"``)."""

    low: float | None = None
    low_open: bool = False
    high: float | None = None
    unit: str = ""
    note: str = ""

    @property
    def expected(self) -> str:
        """What the argument must be, in words: ``a finite number >= 0``."""
        bounds = []
        if self.low is not None:
            bounds.append(f"{'>' if self.low_open else '>='} {_text(self.low)}")
        if self.high is not None:
            bounds.append(f"<= {_text(self.high)}")
        noun = "number" + (f" of {self.unit}" if self.unit else "")
        finite = "" if self.low is not None and self.high is not None else "finite "  # two bounds say it
        text = f"a {finite}{noun}" + (" " + " and ".join(bounds) if bounds else "")
        return text + (f" ({self.note})" if self.note else "")

    def fits(self, x: float) -> bool:
        """Whether the float ``x`` is of this kind."""
        if not math.isfinite(x):
            return False
        if self.low is not None and (x <= self.low if self.low_open else x < self.low):
            return False
        return self.high is None or x <= self.high

    def check(self, value: object, name: str, error: type[XlaSdkError] = XlaSdkError, *, hint: str = "") -> float:
        """``value`` as a float, or ``error`` naming ``name`` (``"compare: rtol"``), what was
        expected and what came, and the user's line; ``hint`` is added after a semicolon."""
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            try:
                x = float(value)
            except (OverflowError, ValueError):  # an int beyond float's range
                x = math.inf
            if self.fits(x):
                return x
        tail = f"; {hint}" if hint else ""
        raise error(f"{name} must be {self.expected}, got {_shown(value)}{tail}{where()}")

    def parse(self, text: str) -> float:
        """The ``type=`` of an option that takes this kind (``float(text)``, then checked)."""
        try:
            x = float(text)
        except ValueError:
            raise _refuse(f"must be {self.expected}, got {_given(text)}") from None
        if not self.fits(x):
            raise _refuse(f"must be {self.expected}, got {_given(text)}")
        return x


@dataclass(frozen=True)
class Integer:
    """A kind of integer argument, ``>= low`` and ``<= high``: Python ints and numpy integers,
    never bools or floats (``1.0`` included)."""

    low: int | None = None
    high: int | None = None

    @property
    def expected(self) -> str:
        """What the argument must be, in words: ``an integer >= 1``."""
        bounds = []
        if self.low is not None:
            bounds.append(f">= {_text(self.low)}")
        if self.high is not None:
            bounds.append(f"<= {_text(self.high)}")
        return "an integer" + (" " + " and ".join(bounds) if bounds else "")

    def fits(self, n: int) -> bool:
        """Whether the int ``n`` is of this kind."""
        return (self.low is None or n >= self.low) and (self.high is None or n <= self.high)

    def check(self, value: object, name: str, error: type[XlaSdkError] = XlaSdkError, *, hint: str = "") -> int:
        """``value`` as an int, or ``error`` naming ``name``, what was expected and what came, and
        the user's line."""
        if not isinstance(value, bool):  # numpy's bool has no __index__
            try:
                n = operator.index(value)  # type: ignore[arg-type]
            except TypeError:
                pass
            else:
                if self.fits(n):
                    return n
        tail = f"; {hint}" if hint else ""
        raise error(f"{name} must be {self.expected}, got {_shown(value)}{tail}{where()}")

    def parse(self, text: str) -> int:
        """The ``type=`` of an option that takes this kind (``int(text)``, then checked)."""
        try:
            n = int(text)
        except ValueError:  # not an integer, or more digits than int() reads
            raise _refuse(f"must be {self.expected}, got {_given(text)}") from None
        if not self.fits(n):
            raise _refuse(f"must be {self.expected}, got {_given(text)}")
        return n


#: ``rtol``, ``atol`` and ``ulps`` of compare (``--rtol``, ``--atol``, ``--ulps``).
TOLERANCE = Real(low=0.0)
#: A timeout or time budget: ``execute(timeout=)``, ``reduce(max_time=, check_timeout=)``,
#: ``--timeout``, ``--max-time``, ``--check-timeout``, ``--join-timeout``.
SECONDS = Real(low=0.0, low_open=True, high=MAX_SECONDS, unit="seconds")
#: ``xs.compile(timeout=)`` and ``$XLASDK_COMPILE_TIMEOUT``, where 0 is documented as no limit.
SECONDS_OR_NO_LIMIT = Real(low=0.0, high=MAX_SECONDS, unit="seconds", note="0: no limit")
#: A wait that may be none: ``xlasdk launch --grace`` (0: SIGKILL at once).
SECONDS_OR_NONE = Real(low=0.0, high=MAX_SECONDS, unit="seconds")
#: The seed of random inputs: ``xs.random_inputs(seed=)``, ``xs.reduce(seed=)``, ``--seed``.
SEED = Integer(low=0, high=MAX_SEED)
#: How many times or things: ``--repeat``, ``--iterations``, ``--devices``, ``-n``...
COUNT = Integer(low=1)


def tolerances(where_: str, rtol: object, atol: object, ulps: object = None,
               ) -> tuple[float | None, float | None, float | None]:
    """compare's ``rtol``, ``atol`` and ``ulps`` (None: the default of each) checked as
    :data:`TOLERANCE`; :class:`~xlasdk.errors.ToleranceError` names the first that is not a finite
    number >= 0. ``where_`` starts the message (``"compare"``)."""
    return (None if rtol is None else TOLERANCE.check(rtol, f"{where_}: rtol", ToleranceError),
            None if atol is None else TOLERANCE.check(atol, f"{where_}: atol", ToleranceError),
            None if ulps is None else TOLERANCE.check(ulps, f"{where_}: ulps", ToleranceError))
