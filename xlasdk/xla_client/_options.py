"""Compile options of the former ``xla_client``: ``DeviceAssignment``, ``DebugOptions``,
``ExecutableBuildOptions``, ``CompileOptions``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._jaxlib import compat as _compat
from ..errors import ShapeError
from ..runtime import CompileOptions as _CompileOptions
from ._shapes import CompileError


# -- compile options --------------------------------------------------------------------------
class DeviceAssignment(tuple[tuple[int, ...], ...]):
    """Device ids per ``[replica][computation]`` (the former ``xla_client.DeviceAssignment``).

    A tuple of rows, so it can be given to ``CompileOptions.device_assignment`` directly.
    """

    @staticmethod
    def create(assignment: Any) -> DeviceAssignment:
        """A DeviceAssignment from an int array of shape ``[replicas, computations]`` (a 1-D
        array is one id per replica).

        Raises
        ------
        ShapeError
            For an empty array, a rank other than 1 or 2, non-integer or negative ids.
        """
        try:
            arr = np.asarray(assignment)
        except Exception:
            arr = np.asarray([], dtype=object)
        if arr.ndim == 1:
            arr = arr.reshape(-1, 1)
        if arr.ndim != 2 or arr.size == 0 or arr.dtype.kind not in "iu" or int(arr.min()) < 0:
            raise ShapeError(
                "DeviceAssignment.create: expected a non-empty 2-D array of device ids >= 0 "
                f"[replicas, computations], got {assignment!r}"
            )
        return DeviceAssignment(tuple(int(x) for x in row) for row in arr)

    def replica_count(self) -> int:
        """Number of replicas (rows)."""
        return len(self)

    def computation_count(self) -> int:
        """Number of computations (partitions) per replica (columns)."""
        return len(self[0]) if self else 0

    def serialize(self) -> bytes:
        """The serialized ``xla.DeviceAssignmentProto`` (as jaxlib's ``DeviceAssignment.serialize``)."""
        return _compat.device_assignment_proto(self)

    def __repr__(self) -> str:
        return f"DeviceAssignment({[list(r) for r in self]})"


class DebugOptions:
    """``executable_build_options.debug_options``: setting ``xla_*`` fields adds XLA options to
    the owning :class:`CompileOptions` ``env_option_overrides``; reading gives the value set
    (AttributeError when unset: XLA's default applies)."""

    __slots__ = ("_owner",)

    _owner: CompileOptions

    def __init__(self, owner: CompileOptions) -> None:
        object.__setattr__(self, "_owner", owner)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("xla_"):
            for k, v in self._owner.env_option_overrides:
                if k == name:
                    return v
        raise AttributeError(f"debug option {name!r} is not set (XLA's default applies)")

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("xla_"):
            raise AttributeError(f"DebugOptions has no field {name!r}; XLA debug options start with 'xla_'")
        env = [p for p in self._owner.env_option_overrides if p[0] != name]
        self._owner.env_option_overrides = [*env, (name, value)]


class ExecutableBuildOptions:
    """``CompileOptions.executable_build_options``: a view of the owning options' replica,
    partition and device-assignment fields, plus ``debug_options``."""

    __slots__ = ("_owner", "use_spmd_partitioning", "use_auto_spmd_partitioning")

    def __init__(self, owner: CompileOptions) -> None:
        self._owner = owner
        self.use_spmd_partitioning = False  # informational: xlasdk partitions when num_partitions > 1
        self.use_auto_spmd_partitioning = False

    @property
    def num_replicas(self) -> int:
        return self._owner.num_replicas

    @num_replicas.setter
    def num_replicas(self, value: int) -> None:
        self._owner.num_replicas = value

    @property
    def num_partitions(self) -> int:
        return self._owner.num_partitions

    @num_partitions.setter
    def num_partitions(self, value: int) -> None:
        self._owner.num_partitions = value

    @property
    def device_assignment(self) -> DeviceAssignment | None:
        a = self._owner.device_assignment
        return None if a is None else DeviceAssignment(a)

    @device_assignment.setter
    def device_assignment(self, value: Any) -> None:
        self._owner.device_assignment = value

    @property
    def debug_options(self) -> DebugOptions:
        return DebugOptions(self._owner)


class CompileOptions(_CompileOptions):
    """``xs.CompileOptions`` with the former fields.

    ``CompileOptions()``, then set ``num_replicas``, ``num_partitions``, ``device_assignment``
    (a :class:`DeviceAssignment` or an int array), ``env_option_overrides`` (``(name, value)``
    pairs), or the same through ``executable_build_options`` (and its ``debug_options``).
    ``tuple_arguments`` / ``parameter_is_tupled_arguments`` must stay False and
    ``argument_layouts`` None (compiling otherwise raises :class:`CompileError`);
    ``compile_portable_executable`` and ``profile_version`` are accepted and ignored.
    """

    __slots__ = (
        "tuple_arguments", "parameter_is_tupled_arguments", "argument_layouts", "compile_portable_executable",
        "profile_version", "_build",
    )

    def __init__(
        self,
        num_replicas: int = 1,
        num_partitions: int = 1,
        device_assignment: Any = None,
        env_option_overrides: Any = None,
        *,
        xla_dump_to: str | None = None,
    ) -> None:
        super().__init__(num_replicas, num_partitions, device_assignment, env_option_overrides, xla_dump_to=xla_dump_to)
        self.tuple_arguments = False
        self.parameter_is_tupled_arguments = False
        self.argument_layouts: Any = None
        self.compile_portable_executable = False
        self.profile_version = 0
        self._build = ExecutableBuildOptions(self)

    @property
    def executable_build_options(self) -> ExecutableBuildOptions:
        return self._build

    def _check_supported(self, what: str) -> None:
        if self.tuple_arguments or self.parameter_is_tupled_arguments:
            raise CompileError(f"{what}: tuple_arguments is not supported; pass one argument per parameter")
        if self.argument_layouts is not None:
            raise CompileError(f"{what}: argument_layouts is not supported; parameters use the default layout")
