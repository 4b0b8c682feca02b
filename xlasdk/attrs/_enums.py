"""Attribute enums: comparison, FFT, RNG, triangular-solve transpose, padding type."""

from __future__ import annotations

from typing import ClassVar

from ..errors import ShapeError
from ._base import _AttrEnum


class ComparisonDirection(_AttrEnum):
    """Direction of ``Compare`` (StableHLO ``#stablehlo<comparison_direction ...>``).

    Values are StableHLO's ``ComparisonDirection`` numbers (XLA's ``Comparison::Direction``).
    """

    EQ = 0
    NE = 1
    GE = 2
    GT = 3
    LE = 4
    LT = 5

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo<comparison_direction {}>"


class ComparisonType(_AttrEnum):
    """How ``Compare`` orders values (StableHLO ``#stablehlo<comparison_type ...>``).

    FLOAT (IEEE partial order), TOTALORDER (IEEE total order), SIGNED, UNSIGNED; values are
    StableHLO's ``ComparisonType`` numbers.
    """

    FLOAT = 1
    TOTALORDER = 2
    SIGNED = 3
    UNSIGNED = 4

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo<comparison_type {}>"


class FftType(_AttrEnum):
    """Kind of ``Fft`` (XLA ``FftType`` proto enum; StableHLO ``#stablehlo<fft_type ...>``)."""

    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo<fft_type {}>"


class RandomAlgorithm(_AttrEnum):
    """Algorithm of ``RngBitGenerator`` (XLA ``RandomAlgorithm``; ``#stablehlo<rng_algorithm ...>``).

    The proto names ``RNG_DEFAULT``, ``RNG_THREE_FRY``, ``RNG_PHILOX`` are accepted by ``parse``.
    """

    DEFAULT = 0
    THREE_FRY = 1
    PHILOX = 2
    # The former xla_client's names (XLA's proto names) are set below the class: attributes that
    # are the members above, without being members of their own (``__members__`` and iteration
    # list each algorithm once).
    RNG_DEFAULT: ClassVar[RandomAlgorithm]
    RNG_THREE_FRY: ClassVar[RandomAlgorithm]
    RNG_PHILOX: ClassVar[RandomAlgorithm]

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo<rng_algorithm {}>"

    @classmethod
    def _aliases(cls) -> dict[str, str]:
        return {"RNG_DEFAULT": "DEFAULT", "RNG_THREE_FRY": "THREE_FRY", "RNG_PHILOX": "PHILOX"}

    def to_hlo(self) -> str:
        """HLO's spelling: ``algorithm=rng_three_fry``."""
        return f"rng_{self.name.lower()}"


for _alias, _name in RandomAlgorithm._aliases().items():
    setattr(RandomAlgorithm, _alias, RandomAlgorithm[_name])


class TriangularSolveOptions_Transpose(_AttrEnum):
    """Transposition of ``a`` in ``TriangularSolve`` (XLA ``TriangularSolveOptions.Transpose``;
    StableHLO ``#stablehlo<transpose ...>``)."""

    NO_TRANSPOSE = 1
    TRANSPOSE = 2
    ADJOINT = 3

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo<transpose {}>"


class RandomDistribution(_AttrEnum):
    """Distribution of the legacy ``Rng`` op (XLA ``RandomDistribution``;
    ``#stablehlo<rng_distribution ...>``). ``RNG_UNIFORM`` / ``RNG_NORMAL`` are accepted too."""

    UNIFORM = 1
    NORMAL = 2

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo<rng_distribution {}>"

    @classmethod
    def _aliases(cls) -> dict[str, str]:
        return {"RNG_UNIFORM": "UNIFORM", "RNG_NORMAL": "NORMAL"}


class PaddingType(_AttrEnum):
    """Window padding policy of the former ``xla_client.PaddingType``.

    ``VALID``: no padding. ``SAME``: pad so the output has ``ceil(input / stride)`` elements along
    each spatial dimension. There is no StableHLO attribute for it: use
    :func:`window_padding_type_to_pad_values` to get explicit ``(lo, hi)`` pairs.
    """

    VALID = 1
    SAME = 2

    def to_mlir(self) -> str:
        """Always raises: padding types become explicit pads before reaching StableHLO."""
        raise ShapeError(
            "PaddingType has no StableHLO form; convert it with window_padding_type_to_pad_values"
        )
