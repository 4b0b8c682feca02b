"""Executables whose results have bounded dynamic dimensions (``f32[<=5]``).

jaxlib 0.10.2's CPU runtime hands such a result back padded to its bound (the entries past the
run-time size are garbage), and cannot take dynamic-shape arguments at all (its compiler has no
``PadToStatic``). So:

* a computation built with a dynamic *result* is compiled with one ``s32[]`` output more per
  dynamic dimension (``GetDimensionSize``); :class:`DynamicResultExecutable` runs it, reads those
  sizes and returns each result at its real extents (a copy through the host). XLA:CPU writes
  such a result densely, row-major in its real extents, at the start of the padded buffer (with
  only the leading dimension dynamic that is the same as a prefix slice; with an inner one it
  is not);
* a dynamic *parameter* is refused with a :class:`CompileError` saying what to do instead
  (a padded static parameter, its size as an ``s32[]`` parameter, and ``ops.SetDimensionSize``);
* a computation loaded from a file with dynamic results is refused (its graph cannot be
  extended here).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import CompileError
from ..shape import ProgramShape, Shape
from .array import DeviceArray, device_put
from .executable import CompileOptions, Executable, compile

__all__ = ["DynamicResultExecutable", "compile_dynamic"]


def compile_dynamic(
    computation: Any, name: str, program_shape: ProgramShape, device: Any, options: CompileOptions, cache: Any
) -> Executable:
    """Compile a computation with bounded dynamic dimensions (see the module docstring)."""
    for i, p in enumerate(program_shape.parameter_shapes()):
        if not p.is_static():
            raise CompileError(
                f"compile: parameter {i} of {name!r} has the dynamic shape {p}, which jaxlib's CPU runtime "
                "cannot take (no PadToStatic); pass the array padded to its bound as a static parameter and "
                "its size as an s32[] parameter, then ops.SetDimensionSize(x, size, dimension) inside"
            )
    root = getattr(computation, "_root", None)
    if root is None:
        raise CompileError(
            f"compile: {name!r} returns dynamic shapes ({program_shape.result_shape()}) and was loaded from a "
            "file: jaxlib would hand back padded arrays; build it with an XlaBuilder to get the real extents"
        )
    from ..ops.control import GetTupleElement, Tuple
    from ..ops.shaping import GetDimensionSize

    b = root.builder
    last = b._last
    try:
        result = program_shape.result_shape()
        outs = [GetTupleElement(root, i) for i in range(len(result.tuple_shapes()))] if result.is_tuple() else [root]
        dyn: list[tuple[int, int]] = []
        sizes = []
        for k, o in enumerate(outs):
            for d in range(o.shape.rank()):
                if o.shape.is_dynamic_dimension(d):
                    dyn.append((k, d))
                    sizes.append(GetDimensionSize(o, d))
        augmented = b.build(Tuple(b, outs + sizes))
    finally:
        b._last = last
    augmented._name = computation.name
    augmented._padded_results = True  # compiled as is: padded results + sizes
    exe = compile(augmented, device, options=options, cache=cache)
    return DynamicResultExecutable._wrap(exe, program_shape, len(outs), dyn)


class DynamicResultExecutable(Executable):
    """An :class:`Executable` whose results have dynamic dimensions: each call returns them cut
    to their run-time sizes (``exe.output_shapes`` shows the bounds, ``f32[<=5]``)."""

    __slots__ = ("_user_shape", "_nout", "_dyn")

    _user_shape: ProgramShape
    _nout: int
    _dyn: tuple[tuple[int, int], ...]

    @classmethod
    def _wrap(
        cls, exe: Executable, program_shape: ProgramShape, nout: int, dyn: Sequence[tuple[int, int]]
    ) -> DynamicResultExecutable:
        new = object.__new__(cls)
        for k in Executable.__slots__:
            if k != "__weakref__":
                object.__setattr__(new, k, getattr(exe, k))
        new._user_shape = program_shape
        new._nout = nout
        new._dyn = tuple(dyn)
        return new

    def program_shape(self) -> ProgramShape:
        return self._user_shape

    def __repr__(self) -> str:
        devs = ", ".join(str(d) for d in self._devices)
        return f"Executable({self._name!r}, {self._user_shape}, devices=[{devs}])"

    def serialize(self) -> bytes:
        """Refused: the blob would load as the padded program (results padded to their bounds,
        plus their sizes). Compile the computation again where it runs.

        Raises
        ------
        XlaRuntimeError
            Always.
        """
        from ..errors import XlaRuntimeError

        raise XlaRuntimeError(
            f"{self._name!r} returns dynamic shapes, cut to size by xlasdk after each run: it cannot be "
            "serialized (compile it again where it runs)"
        )

    @property
    def output_shapes(self) -> tuple[Shape, ...]:
        r = self._user_shape.result_shape()
        return r.tuple_shapes() if r.is_tuple() else (r,)

    def _cut(self, padded: Any) -> DeviceArray | tuple[DeviceArray, ...]:
        vals = list(padded)
        outs, sizes = vals[: self._nout], vals[self._nout :]
        extents: dict[int, list[int]] = {}
        for (k, d), size in zip(self._dyn, sizes, strict=True):
            extents.setdefault(k, list(outs[k].shape))[d] = int(size.to_numpy())
        # XLA:CPU writes a dynamic result densely at the start of its padded buffer (row-major
        # in the real extents), not at the positions of the padded array.
        cut = [
            device_put(self._dense(o.to_numpy(), extents[k]), o.device) if k in extents else o
            for k, o in enumerate(outs)
        ]
        return tuple(cut) if self._user_shape.result_shape().is_tuple() else cut[0]

    @staticmethod
    def _dense(padded: np.ndarray[Any, Any], real: list[int]) -> np.ndarray[Any, Any]:
        n = int(np.prod(real, dtype=np.int64))
        return np.array(padded.reshape(-1)[:n].reshape(real))

    def __call__(self, *args: Any) -> DeviceArray | tuple[DeviceArray, ...]:
        """Run as ``Executable.__call__``; dynamic results come back at their run-time sizes."""
        return self._cut(Executable.__call__(self, *args))

    def execute_replicated(
        self, per_device_args: Sequence[Sequence[Any]]
    ) -> list[DeviceArray | tuple[DeviceArray, ...]]:
        """As :meth:`Executable.execute_replicated`, each device's dynamic results cut to size."""
        return [self._cut(r) for r in Executable.execute_replicated(self, per_device_args)]
