"""Which StableHLO/HLO ops the installed jaxlib's XLA knows, decided once at import.

jaxlib 0.12.1 (extension version 525) added ``stablehlo.exp2``, ``stablehlo.log2`` and
``stablehlo.fma`` and their HLO opcodes (``exp2``, ``log2``, ``fma``); JAX 0.12.1 lowers
``jax.lax.exp2``, ``jnp.log2`` and ``erf_inv`` with them. jaxlib 0.12.0.1 (505) and older have
none of them: their parsers refuse a module that holds one. ``ops.Exp2``, ``ops.Log2`` and
``ops.Fma`` build the op where it exists and a lowering that gives the same values where it does
not (:mod:`xlasdk.ops.elementwise`, :mod:`xlasdk.ops.fma`). ``tests/test_optable.py`` checks this
flag against the live dialect registry, so a release that moves the ops fails there, not in a
user's program.
"""

from __future__ import annotations

import re
from typing import Final

from jaxlib import xla_client as _xc

__all__ = ["HAS_EXP2_LOG2_FMA", "FIRST_WITH_EXP2_LOG2_FMA", "newer_op_hint"]

FIRST_WITH_EXP2_LOG2_FMA: Final[str] = "0.12.1"
"""The first jaxlib release whose StableHLO and XLA have ``exp2``, ``log2`` and ``fma``."""

HAS_EXP2_LOG2_FMA: Final[bool] = int(getattr(_xc, "_version", 0)) >= 525
"""True where ``stablehlo.exp2`` / ``log2`` / ``fma`` can be written (jaxlib 0.12.1+)."""

_NEWER_OP = re.compile(r"(?:Unknown opcode: |custom op 'stablehlo\.)(exp2|log2|fma)\b")


def newer_op_hint(message: str) -> str:
    """For a parser's refusal of an op this jaxlib lacks (``Unknown opcode: exp2``, ``custom op
    'stablehlo.fma' is unknown``): a sentence naming the release that has it; "" otherwise."""
    m = _NEWER_OP.search(message)
    if m is None or HAS_EXP2_LOG2_FMA:
        return ""
    return (f" ({m.group(1)} is an op of jaxlib {FIRST_WITH_EXP2_LOG2_FMA} and newer, which wrote this file; the "
            f"installed jaxlib's XLA has no {m.group(1)}: load it under jaxlib {FIRST_WITH_EXP2_LOG2_FMA}+)")
