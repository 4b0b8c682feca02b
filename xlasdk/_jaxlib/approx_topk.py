"""XLA's ``ApproxTopKReductionOutputSize`` as jaxlib 0.10.2 exposes it
(``jaxlib._jax.approx_top_k_reduction_output_size``), so ``ops.ApproxTopK`` sizes its result
exactly as XLA (and jax's ``lax.approx_max_k``) does."""

from __future__ import annotations

import importlib
from typing import Any, Final

_jax: Final[Any] = importlib.import_module("jaxlib._jax")  # untyped extension module

__all__ = ["reduction_output_size"]


def reduction_output_size(
    input_size: int, rank: int, top_k: int, recall_target: float, aggregate_to_topk: bool, input_size_override: int,
) -> tuple[int, int]:
    """``(output_size, log2_reduction)``.

    Raises
    ------
    ValueError
        XLA's message when it rejects the arguments (an override below ``input_size``, a recall
        target outside (0, 1]).
    """
    try:
        size, log2 = _jax.approx_top_k_reduction_output_size(
            input_size, rank, top_k, recall_target, aggregate_to_topk, input_size_override
        )
    except Exception as e:  # JaxRuntimeError: INVALID_ARGUMENT
        raise ValueError(str(e).removeprefix("INVALID_ARGUMENT: ")) from None
    return int(size), int(log2)
