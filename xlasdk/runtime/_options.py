"""``CompileOptions`` (what :func:`~xlasdk.compile` is asked for) and ``MemoryStats``."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

import numpy as np

from ..errors import CompileError

OptionValue = str | bool | int | float


# -- CompileOptions ---------------------------------------------------------------------------
_FLAG_RE: Final = re.compile(r"^xla_[a-z0-9_]+$")


def _positive_int(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise CompileError(f"CompileOptions.{field} must be an int >= 1, got {value!r}")
    return int(value)


def _assignment(value: Any) -> tuple[tuple[int, ...], ...] | None:
    if value is None:
        return None
    try:
        arr = np.asarray(value)
    except Exception:
        arr = np.asarray([], dtype=object)
    if arr.ndim == 1 and arr.size:
        arr = arr.reshape(-1, 1)  # a list of ids: one per replica
    if arr.ndim != 2 or arr.size == 0 or arr.dtype.kind not in "iu":
        raise CompileError(
            "CompileOptions.device_assignment must be a non-empty 2-D array of device ids "
            f"[num_replicas, num_partitions] (or a 1-D list, one id per replica), got {value!r}"
        )
    ids = [int(x) for x in arr.ravel()]
    if min(ids) < 0 or len(set(ids)) != len(ids):
        raise CompileError(f"CompileOptions.device_assignment ids must be distinct and >= 0, got {ids}")
    return tuple(tuple(int(x) for x in row) for row in arr)


def _overrides(value: Any) -> tuple[tuple[str, OptionValue], ...]:
    if value is None:
        return ()
    items: Iterable[Any] = value.items() if isinstance(value, Mapping) else value
    out: list[tuple[str, OptionValue]] = []
    try:
        pairs = [tuple(p) for p in items]
    except TypeError:
        raise CompileError(
            "CompileOptions.env_option_overrides must be a mapping or a list of (name, value) pairs, "
            f"got {value!r}"
        ) from None
    for pair in pairs:
        if len(pair) != 2:
            raise CompileError(f"CompileOptions.env_option_overrides: {pair!r} is not a (name, value) pair")
        name, v = pair
        if not isinstance(name, str) or not _FLAG_RE.match(name):
            raise CompileError(
                f"CompileOptions.env_option_overrides: {name!r} is not an XLA option name (xla_[a-z0-9_]+)"
            )
        if isinstance(v, os.PathLike):
            v = os.fspath(v)
        if isinstance(v, np.generic):
            v = v.item()
        if not isinstance(v, (str, bool, int, float)):
            raise CompileError(
                f"CompileOptions.env_option_overrides: {name} must be a str, bool, int or float, got {v!r}"
            )
        out.append((name, v))
    return tuple(out)


class CompileOptions:
    """Options for :func:`compile` (mirrors ``xla::CompileOptions``).

    Parameters
    ----------
    num_replicas:
        Number of replicas (data-parallel copies, each on its own device; ``>= 1``).
    num_partitions:
        Number of SPMD partitions (``>= 1``); above 1 SPMD partitioning is switched on and
        parameters without sharding annotations are replicated.
    device_assignment:
        Device ids, an int array of shape ``[num_replicas, num_partitions]`` (a 1-D list is one
        id per replica). Default: the first ``num_replicas * num_partitions`` devices of the
        client, starting at the ``device`` given to :func:`compile`.
    env_option_overrides:
        XLA debug/compile options as a mapping or ``(name, value)`` pairs, for example
        ``{"xla_cpu_enable_fast_math": False, "xla_dump_to": "/tmp/dump"}``. Unknown names are
        rejected by XLA at compile time (:class:`~xlasdk.CompileError`).
    xla_dump_to:
        Shortcut for ``env_option_overrides["xla_dump_to"]``: a directory where XLA writes the
        HLO before and after optimization, LLVM IR and the buffer assignment.

    Raises
    ------
    CompileError
        For an invalid value (checked on construction and on assignment).
    """

    __slots__ = ("_num_replicas", "_num_partitions", "_device_assignment", "_env")

    def __init__(
        self,
        num_replicas: int = 1,
        num_partitions: int = 1,
        device_assignment: Any = None,
        env_option_overrides: Mapping[str, OptionValue] | Iterable[tuple[str, OptionValue]] | None = None,
        *,
        xla_dump_to: str | os.PathLike[str] | None = None,
    ) -> None:
        self.num_replicas = num_replicas
        self.num_partitions = num_partitions
        self.device_assignment = device_assignment
        env = list(_overrides(env_option_overrides))
        if xla_dump_to is not None:
            env = [p for p in env if p[0] != "xla_dump_to"] + [("xla_dump_to", os.fspath(xla_dump_to))]
        self._env = tuple(env)

    @property
    def num_replicas(self) -> int:
        return self._num_replicas

    @num_replicas.setter
    def num_replicas(self, value: int) -> None:
        self._num_replicas = _positive_int("num_replicas", value)

    @property
    def num_partitions(self) -> int:
        return self._num_partitions

    @num_partitions.setter
    def num_partitions(self, value: int) -> None:
        self._num_partitions = _positive_int("num_partitions", value)

    @property
    def device_assignment(self) -> tuple[tuple[int, ...], ...] | None:
        """Device ids per ``[replica][partition]``, or None for the default."""
        return self._device_assignment

    @device_assignment.setter
    def device_assignment(self, value: Any) -> None:
        self._device_assignment = _assignment(value)

    @property
    def env_option_overrides(self) -> tuple[tuple[str, OptionValue], ...]:
        """XLA options as ``(name, value)`` pairs."""
        return self._env

    @env_option_overrides.setter
    def env_option_overrides(self, value: Any) -> None:
        self._env = _overrides(value)

    @property
    def num_devices(self) -> int:
        """``num_replicas * num_partitions``."""
        return self._num_replicas * self._num_partitions

    def __repr__(self) -> str:
        parts = [f"num_replicas={self._num_replicas}", f"num_partitions={self._num_partitions}"]
        if self._device_assignment is not None:
            parts.append(f"device_assignment={[list(r) for r in self._device_assignment]}")
        if self._env:
            parts.append(f"env_option_overrides={dict(self._env)}")
        return f"CompileOptions({', '.join(parts)})"


@dataclasses.dataclass(frozen=True)
class MemoryStats:
    """Memory an executable needs, in bytes (``xla::CompiledMemoryStats``).

    ``peak_memory_in_bytes`` is the peak of live device memory during a run, as XLA's buffer
    assignment computes it. ``host_*`` count host memory for programs that use it.
    """

    argument_size_in_bytes: int
    output_size_in_bytes: int
    temp_size_in_bytes: int
    alias_size_in_bytes: int
    generated_code_size_in_bytes: int
    peak_memory_in_bytes: int
    host_argument_size_in_bytes: int = 0
    host_output_size_in_bytes: int = 0
    host_temp_size_in_bytes: int = 0
    host_alias_size_in_bytes: int = 0
    host_generated_code_size_in_bytes: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)
