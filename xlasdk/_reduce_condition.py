"""What the reducer's search asks of a problem: whether a candidate (HLO text and arguments) still
shows it. :mod:`xlasdk.reducer` holds the conditions of one device (a crash, a compile error, a
divergence, a user's script); :mod:`xlasdk._reduce_partitions` the divergence of a per-partition
program on every partition. Both derive from :class:`Condition`, which sits below them so that
neither imports the other."""

from __future__ import annotations

from typing import Any

import numpy as np


class Condition:
    """Whether a candidate (HLO text and arguments) still shows the problem."""

    name = ""
    needs_arguments = False
    compiles = True

    def holds(self, text: str, args: list[np.ndarray[Any, Any]] | None, timeout: float) -> tuple[bool, str]:
        """``(shows the problem, what was seen)`` for one candidate, within ``timeout`` seconds."""
        raise NotImplementedError
