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
* a dynamic *parameter* (``Parameter(b, 0, Shape.array_shape(f32, (5,), dynamic_dimensions=[True]))``)
  becomes a static argument of its bounds plus an ``s32[]`` size per dynamic dimension, joined
  by ``set_dimension_size`` in the program; the executable takes an array of any size up to the
  bound there, zero-pads it and passes the sizes;
* a computation loaded from a file with dynamic results is refused (its graph cannot be
  extended here).

The program rewrite is :func:`xlasdk.program.computation.static_interface` (a graph rewrite);
``xs.compile`` compiles the rewritten program and wraps it in :class:`DynamicResultExecutable`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import DTypeError, ShapeError, XlaRuntimeError, XlaSdkError
from ..shape import ProgramShape, Shape
from ._executable import Executable
from .array import DeviceArray, device_put

__all__ = ["DynamicResultExecutable"]


class DynamicResultExecutable(Executable):
    """An :class:`Executable` whose results have dynamic dimensions: each call returns them cut
    to their run-time sizes (``exe.output_shapes`` shows the bounds, ``f32[<=5]``)."""

    __slots__ = ("_user_shape", "_nout", "_dyn", "_dyn_params", "_size_params")

    _user_shape: ProgramShape
    _nout: int
    _dyn: tuple[tuple[int, int], ...]
    _dyn_params: tuple[tuple[int, tuple[int, ...]], ...]
    #: (parameter number, instruction, dimension, bound) of each parameter that sets a dimension's
    #: run-time size (:func:`xlasdk.program.dynamic_sizes.dimension_size_parameters`), read on the first call
    _size_params: tuple[tuple[int, str, int, int], ...] | None

    @classmethod
    def _wrap(
        cls,
        exe: Executable,
        program_shape: ProgramShape,
        nout: int,
        dyn: Sequence[tuple[int, int]],
        dyn_params: Sequence[tuple[int, tuple[int, ...]]] = (),
    ) -> DynamicResultExecutable:
        new = object.__new__(cls)
        for k in Executable.__slots__:
            if k != "__weakref__":
                object.__setattr__(new, k, getattr(exe, k))
        new._user_shape = program_shape
        new._nout = nout
        new._dyn = tuple(dyn)
        new._dyn_params = tuple(dyn_params)
        new._size_params = None
        return new

    def _check_sizes(self, args: Sequence[Any], where: str = "") -> None:
        """A ShapeError for an argument that sets a dimension's run-time size outside ``[0, bound]``
        (XLA would run on with a size past the buffer)."""
        if self._size_params is None:
            from ..program.dynamic_sizes import dimension_size_parameters

            comp = getattr(self, "_computation", None)
            try:
                self._size_params = () if comp is None else tuple(dimension_size_parameters(comp))
            except XlaSdkError:  # a program the graph cannot read: the sizes XLA returns are checked
                self._size_params = ()
        for i, ins, dim, bound in self._size_params:
            if i >= len(args):
                continue
            a = args[i].to_numpy() if isinstance(args[i], DeviceArray) else np.asarray(args[i])
            if a.size != 1 or a.dtype.kind not in "iu":
                continue  # the argument's own shape or dtype error comes from the call
            size = int(a.reshape(-1)[0])
            if not 0 <= size <= bound:
                name = self._user_shape.parameter_names()[i]
                raise ShapeError(
                    f"{self._name}: {where}argument {i} ({name!r}) is the run-time size of dimension {dim} of "
                    f"{ins}, whose bound is {bound}: expected a size in [0, {bound}], got {size}")

    @property
    def input_shapes(self) -> tuple[Shape, ...]:
        return self._user_shape.parameter_shapes()

    def _pad(self, args: Sequence[Any], where: str = "") -> list[Any]:
        """The program's arguments: each dynamic parameter's array zero-padded to its bounds,
        then the sizes of its dynamic dimensions as ``s32[]`` (after all the parameters)."""
        out = list(args)
        sizes: list[Any] = []
        if len(out) != len(self._user_shape.parameter_shapes()):
            return out  # the count error comes from the call
        for i, dims in self._dyn_params:
            p = self._user_shape.parameter_shapes()[i]
            a = out[i].to_numpy() if isinstance(out[i], DeviceArray) else np.asarray(out[i])
            bounds = p.dimensions()
            name = self._user_shape.parameter_names()[i]
            if a.dtype != p.numpy_dtype():
                raise DTypeError(f"{self._name}: {where}argument {i} ({name!r}) has dtype {a.dtype}, expected {p}")
            ok = a.ndim == len(bounds) and all(
                (0 <= n <= bnd) if d in dims else n == bnd
                for d, (n, bnd) in enumerate(zip(a.shape, bounds, strict=False))
            )
            if not ok:
                raise ShapeError(
                    f"{self._name}: {where}argument {i} ({name!r}) has shape {a.shape}, expected {p} (each "
                    "<= dimension at most its bound)"
                )
            full = np.zeros(bounds, dtype=a.dtype)
            full[tuple(slice(0, n) for n in a.shape)] = a
            out[i] = full
            sizes += [np.int32(a.shape[d]) for d in dims]
        return out + sizes

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
        raise XlaRuntimeError(
            f"{self._name!r} returns dynamic shapes, cut to size by xlasdk after each run: it cannot be "
            "serialized (compile it again where it runs)"
        )

    @property
    def output_shapes(self) -> tuple[Shape, ...]:
        r = self._user_shape.result_shape()
        return r.tuple_shapes() if r.is_tuple() else (r,)

    def _cut(self, padded: Any, where: str = "") -> DeviceArray | tuple[DeviceArray, ...]:
        if not self._dyn:
            return padded  # type: ignore[no-any-return]
        vals = list(padded)
        outs, sizes = vals[: self._nout], vals[self._nout :]
        extents: dict[int, list[int]] = {}
        for (k, d), size in zip(self._dyn, sizes, strict=True):
            n, bound = int(size.to_numpy()), int(outs[k].shape[d])
            if not 0 <= n <= bound:  # a size the program computed from its arguments
                raise ShapeError(
                    f"{self._name}: {where}result {k}'s dimension {d} came out of run-time size {n}, outside [0, "
                    f"{bound}] (its bound): a size computed from the arguments must stay within the bound")
            extents.setdefault(k, list(outs[k].shape))[d] = n
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
        """Run as ``Executable.__call__``: an argument for a dynamic parameter may be smaller than
        its bound along the dynamic dimensions; dynamic results come back at their run-time sizes.

        Raises
        ------
        ShapeError
            An argument larger than its bound, or one that sets a dimension's run-time size
            (``DynamicReshape``'s sizes, ``SetDimensionSize``) outside ``[0, bound]`` (naming the
            parameter, the dimension, the bound and the size given), or a size the program
            computes outside it."""
        self._check_sizes(args)
        return self._cut(Executable.__call__(self, *self._pad(args)))

    def execute_replicated(
        self, per_device_args: Sequence[Sequence[Any]]
    ) -> list[DeviceArray | tuple[DeviceArray, ...]]:
        """As :meth:`Executable.execute_replicated`, with dynamic arguments and results as for a call."""
        for k, a in enumerate(per_device_args):
            self._check_sizes(a, f"device {k}, ")
        padded = [self._pad(a, f"device {k}, ") for k, a in enumerate(per_device_args)]
        return [self._cut(r, f"device {k}, ") for k, r in enumerate(Executable.execute_replicated(self, padded))]
