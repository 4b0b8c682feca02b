"""Running one partition's program of an SPMD program (XLA's ``*after_optimizations*`` dump of a
program its SPMD partitioner split over several devices) from the program's *global* arrays.

Such a module's parameters and results are one partition's pieces. :class:`PerPartitionPlan`
says how the program's global arrays are split into them and how the pieces of the outputs are
put together again:

- the parameters' shardings are the module's own (the ``sharding={...}`` a dump keeps on its
  parameters), else (XLA of jaxlib 0.12 keeps none in an optimized module) those of the program's
  ``before_optimizations`` module (given, or the file XLA wrote beside the dump:
  ``module_0000.jit_f.before_optimizations.txt`` for ``module_0000.jit_f.cpu_after_optimizations.txt``),
  which must split its global shapes into the dump's;
- the results' shardings, which the optimized module does not keep, come from that
  ``before_optimizations`` module (compiled for the partitions when it leaves them to XLA's
  propagation), else from the module's own ROOT sharding.

Shardings in every notation XLA writes are read (``{devices=[4,1]<=[4]}``, ``{mesh['x'=4], [{'x'},
{}]}``, Shardy's)::

    comp = xs.load_computation("module_0000.jit_f.cpu_after_optimizations.txt")
    plan = PerPartitionPlan.of(comp, path="module_0000.jit_f.cpu_after_optimizations.txt")
    outs = run_per_partition(plan, [x, w])          # the program's global outputs
    pieces = plan.split([x, w])                     # each partition's arguments
    outs = plan.put_together(plan.execute(exe, pieces))

A plan never guesses: where the shardings are unknown, :meth:`PerPartitionPlan.split` and
:meth:`PerPartitionPlan.put_together` refuse and say what to give.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._jaxlib import pjrt
from ..errors import DTypeError, ShapeError, XlaRuntimeError, XlaSdkError
from ..shape import Shape
from ..sharding import HloSharding

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ._executable import Executable
    from ._options import CompileOptions
    from .device import Device

__all__ = ["PerPartitionPlan", "run_per_partition", "per_partition_count", "before_files"]

_AFTER = re.compile(r"(?:cpu_|gpu_|tpu_)?after_optimizations")

#: Where the parameters' shardings of a plan come from when the dump keeps them itself.
OWN_PARAMETER_SHARDINGS = "the dump's parameter shardings"

Array = np.ndarray[Any, Any]


def per_partition_count(computation: XlaComputation) -> int | None:
    """The number of partitions of ``computation`` when it is an optimized per-partition dump
    (one partition's program of an SPMD program), else None."""
    from ..program.computation import compile_request
    from .isolated_compile import per_partition_devices

    text = compile_request(computation).module_text
    n = per_partition_devices(text)
    if n is None and "mhlo.fusion" in text:
        p = computation.partitioning().num_partitions
        n = p if p is not None and p > 1 else None
    return n


def before_files(path: str | os.PathLike[str]) -> list[str]:
    """The ``before_optimizations`` files XLA would have written beside the optimized dump
    ``path`` (those that exist): ``module.before_optimizations.txt`` (or ``.hlo.pb``) for
    ``module.cpu_after_optimizations.txt``."""
    path = os.fspath(path)
    candidates = []
    base = os.path.basename(path)
    if _AFTER.search(base):
        for ext in ("", ".txt", ".hlo.pb"):
            name = _AFTER.sub("before_optimizations", base)
            if ext:
                name = re.sub(r"\.(txt|hlo\.pb|pb)$", "", name) + ext
            candidates.append(os.path.join(os.path.dirname(path), name))
    return [c for c in dict.fromkeys(candidates) if os.path.isfile(c)]


@dataclass(frozen=True, eq=False)
class PerPartitionPlan:
    """How the global arrays of an optimized per-partition dump's program are split into each
    partition's arguments, and how the partitions' outputs are put together (see the module's
    docstring). Made by :meth:`of`; plans compare by identity.

    Attributes
    ----------
    computation: the per-partition module.
    num_partitions: how many partitions run it (one device each, 1 replica).
    parameter_names, parameter_shapes: the module's parameters (one partition's shapes).
    parameter_shardings: each parameter's sharding (replicated where none is known).
    global_parameter_shapes: the program's global parameter shapes.
    parameter_source: where the parameters' shardings were read; None when nowhere (the dump keeps
        none and no before_optimizations module fits): global arrays cannot be split.
    result_shardings, global_result_dims: each result's sharding and global dimensions; None when
        unknown (the partitions' outputs cannot be put together).
    result_source: where the results' shardings were read, or why they are unknown.
    before, before_path: the program's before_optimizations module (the one given, else the first
        file beside the dump that loads) and its file; None when there is none.
    """

    computation: XlaComputation
    num_partitions: int
    parameter_names: tuple[str, ...]
    parameter_shapes: tuple[Shape, ...]
    parameter_shardings: tuple[HloSharding, ...]
    global_parameter_shapes: tuple[Shape, ...]
    parameter_source: str | None
    result_shardings: tuple[HloSharding, ...] | None
    global_result_dims: tuple[tuple[int, ...], ...] | None
    result_source: str
    before: XlaComputation | None
    before_path: str | None

    @classmethod
    def of(cls, computation: XlaComputation, *, path: str | os.PathLike[str] | None = None,
           before: XlaComputation | str | os.PathLike[str] | None = None,
           num_partitions: int | None = None) -> PerPartitionPlan:
        """The plan of the per-partition module ``computation``.

        Parameters
        ----------
        computation: an optimized per-partition dump (loaded, or edited from one).
        path: the file it was loaded from: the before_optimizations files beside it are read
            (:func:`before_files`).
        before: the program's before_optimizations module (or its file), tried first.
        num_partitions: the partition count (default: the dump's, :func:`per_partition_count`).

        Raises
        ------
        ShapeError
            ``computation`` is no per-partition dump, or a sharding it keeps does not fit its
            parameter (or cannot be read).
        FormatError
            ``before`` names a file that does not load.
        """
        n = num_partitions if num_partitions is not None else per_partition_count(computation)
        if n is None or n < 1:
            raise ShapeError(f"{computation.name!r} is not an optimized per-partition dump (one partition's program "
                             "of an SPMD program, XLA's after_optimizations module of it): it has no per-partition "
                             "plan")
        where = os.fspath(path) if path is not None else repr(computation.name)
        befores = _Befores(path, before)
        ps = computation.program_shape()
        names = list(ps.parameter_names())
        local = list(ps.parameter_shapes())
        part = computation.partitioning()
        texts = list(part.parameter_shardings) + [None] * (len(names) - len(part.parameter_shardings))
        in_source: str | None = OWN_PARAMETER_SHARDINGS
        if any(texts[: len(names)]) or not names:
            shardings = [_parse(where, s, part.meshes) if s else HloSharding.replicate() for s in texts[: len(names)]]
            global_shapes = [_global_shape(where, nm, s, sh) for nm, s, sh in zip(names, local, shardings, strict=True)]
        else:
            found = _before_parameter_shardings(local, n, befores)
            if found is not None:
                shardings, global_shapes, in_source = found
            else:
                shardings, global_shapes, in_source = [HloSharding.replicate() for _ in names], list(local), None
        out_shardings, out_dims, out_source = _result_shardings(computation, n, befores)
        first = befores.first()
        return cls(computation, n, tuple(names), tuple(local), tuple(shardings), tuple(global_shapes), in_source,
                   None if out_shardings is None else tuple(out_shardings),
                   None if out_dims is None else tuple(out_dims), out_source,
                   None if first is None else first[1], None if first is None else first[2])

    @property
    def num_results(self) -> int:
        """How many (leaf) results the program has."""
        return len(_leaves(self.computation.program_shape().result_shape()))

    def split(self, global_args: Sequence[Any]) -> list[list[Array]]:
        """Each partition's arguments (one list per partition, in partition order) from the
        program's global arrays, split by the parameters' shardings (a piece padded to the tile
        shape, as XLA expects).

        Raises
        ------
        ShapeError, DTypeError
            A wrong number of arrays, or one of another shape or element type than the global
            parameter's (naming it); the parameters' shardings are unknown.
        """
        if self.parameter_source is None:
            raise ShapeError(
                f"{self.computation.name!r} is an optimized per-partition dump (one partition's program of "
                f"{self.num_partitions}) whose parameters carry no sharding (XLA of jaxlib 0.12 writes none into an "
                "optimized module) and no before_optimizations module says how the program's global arrays are "
                "split: give the plan the program's before_optimizations module (PerPartitionPlan.of(comp, "
                "before=...)), or each partition's own arguments")
        values = self.check_global(global_args)
        return [[_piece(v, sh, k, self.num_partitions) for v, sh in zip(values, self.parameter_shardings, strict=True)]
                for k in range(self.num_partitions)]

    def check_global(self, global_args: Sequence[Any]) -> list[Array]:
        """``global_args`` as arrays, checked against the global parameter shapes.

        Raises
        ------
        ShapeError, DTypeError
            A wrong number of arrays, or one of another shape or element type (naming the parameter).
        """
        if len(global_args) != len(self.parameter_names):
            raise ShapeError(f"{self.computation.name!r}: the program takes {len(self.parameter_names)} global "
                             f"array(s) ({self._wanted()}); got {len(global_args)}")
        out = []
        for i, (a, nm, g) in enumerate(zip(global_args, self.parameter_names, self.global_parameter_shapes,
                                           strict=True)):
            v = np.asarray(a)
            if not g.is_array():
                out.append(v)
                continue
            want_dims, want_dtype = tuple(g.dimensions()), np.dtype(g.numpy_dtype())
            if tuple(v.shape) != want_dims or v.dtype != want_dtype:
                err = ShapeError if tuple(v.shape) != want_dims else DTypeError
                raise err(f"{self.computation.name!r}: global input for parameter {i} ({nm!r}) must be {g}, got "
                          f"{v.dtype}{list(v.shape)}")
            out.append(v)
        return out

    def join(self, per_partition_args: Sequence[Sequence[Any]]) -> list[Array]:
        """The program's global arrays whose pieces ``per_partition_args`` holds (each partition's
        arguments, in partition order): the inverse of :meth:`split`.

        Raises
        ------
        ShapeError
            The partitions' pieces of a parameter disagree where its sharding gives them the same
            tile (they are no pieces of one global array).
        """
        dims = [tuple(s.dimensions()) if s.is_array() else () for s in self.global_parameter_shapes]
        rows = [[np.asarray(v) for v in row] for row in per_partition_args]
        return _assemble(self.computation.name, rows, self.parameter_shardings, dims, self.num_partitions, ShapeError,
                         "input")

    def put_together(self, per_partition_outputs: Sequence[Sequence[Any]]) -> list[Array]:
        """Each result's global array from every partition's outputs (one list per partition, in
        partition order). The partitions that hold the same tile must agree: a program whose
        copies of a tile differ is reported, never one of them picked.

        Raises
        ------
        ShapeError
            The results' shardings are unknown (:attr:`result_source` says why).
        XlaRuntimeError
            Two partitions' pieces of one tile differ.
        """
        if self.result_shardings is None or self.global_result_dims is None:
            raise ShapeError(f"{self.computation.name!r}: {self.result_source}; the partitions' outputs cannot be put "
                             "together into the program's global outputs (give the plan the program's "
                             "before_optimizations module: PerPartitionPlan.of(comp, before=...))")
        rows = [[np.asarray(v) for v in row] for row in per_partition_outputs]
        return _assemble(self.computation.name, rows, self.result_shardings, self.global_result_dims,
                         self.num_partitions, XlaRuntimeError, "output")

    def device_for(self, device: Device | str | int | None = None) -> Device:
        """The first device the partitions run on: ``device`` (default: the default device), or,
        where it is a CPU device of a client of fewer devices than partitions, the first of a CPU
        client of :attr:`num_partitions` devices."""
        from .device import _resolve_device, client

        dev = _resolve_device(device)
        if dev.platform == "cpu" and dev.client.device_count < self.num_partitions:
            return client("cpu", num_devices=self.num_partitions).devices()[0]
        return dev

    def compile(self, device: Device | str | int | None = None, *,
                options: CompileOptions | None = None) -> Executable:
        """The per-partition module compiled for 1 replica x :attr:`num_partitions` partitions,
        from :meth:`device_for` ``(device)`` on; ``options``' other fields are kept.

        Raises
        ------
        CompileError
            As :func:`xlasdk.compile` (too few devices: DeviceCountError).
        """
        from ._compile import compile as _compile
        from ._options import CompileOptions

        opts = CompileOptions(num_replicas=1, num_partitions=self.num_partitions)
        if options is not None:
            opts.env_option_overrides = options.env_option_overrides
            opts.device_assignment = options.device_assignment
        return _compile(self.computation, self.device_for(device), options=opts)

    @staticmethod
    def execute(exe: Executable, per_partition_args: Sequence[Sequence[Any]]) -> list[list[Array]]:
        """Each partition's outputs (host arrays, one list per partition) of ``exe`` run on
        ``per_partition_args`` (:meth:`Executable.execute_replicated`)."""
        return [[np.asarray(o.to_numpy()) for o in (r if isinstance(r, (tuple, list)) else (r,))]
                for r in exe.execute_replicated(per_partition_args)]

    def _wanted(self) -> str:
        return ", ".join(f"{n}: {g}" for n, g in zip(self.parameter_names, self.global_parameter_shapes, strict=True))


def run_per_partition(computation: XlaComputation | PerPartitionPlan, global_args: Sequence[Any], *,
                      device: Device | str | int | None = None, options: CompileOptions | None = None,
                      path: str | os.PathLike[str] | None = None,
                      before: XlaComputation | str | os.PathLike[str] | None = None) -> list[Array]:
    """The global outputs of an optimized per-partition dump run from the program's global arrays:
    split by the parameters' shardings, each partition run on its pieces on its own device (from
    ``device`` on, see :meth:`PerPartitionPlan.device_for`), the outputs put together by the
    results' shardings.

    Parameters
    ----------
    computation: the per-partition module, or its :class:`PerPartitionPlan`.
    global_args: one global array per parameter.
    device: the first device (default: a CPU client of as many devices as partitions).
    options: compile options (the replica and partition counts are the plan's).
    path, before: where the plan reads shardings (:meth:`PerPartitionPlan.of`), for a computation.

    Raises
    ------
    ShapeError, DTypeError
        Global arrays that do not fit; shardings that are unknown (the message says what to give).
    XlaRuntimeError
        Two partitions' pieces of one output tile differ.
    """
    plan = computation if isinstance(computation, PerPartitionPlan) else PerPartitionPlan.of(
        computation, path=path, before=before)
    pieces = plan.split(global_args)
    if plan.result_shardings is None:  # before compiling: say so at once
        plan.put_together([])
    exe = plan.compile(device, options=options)
    return plan.put_together(plan.execute(exe, pieces))


# -- the plan's parts -------------------------------------------------------------------------------
def _parse(where: str, text: str, meshes: Any) -> HloSharding:
    try:
        return HloSharding.parse(text, meshes=meshes)
    except ShapeError as e:
        raise ShapeError(f"{where}: {e}") from None


def _global_shape(where: str, name: str, s: Shape, sh: HloSharding) -> Shape:
    """The global shape of a parameter of per-partition shape ``s`` and sharding ``sh``."""
    if not s.is_array():
        return s
    dims = tuple(s.dimensions())
    if sh.is_tiled:
        counts = sh.tile_counts
        if len(counts) != len(dims):
            raise ShapeError(f"{where}: parameter {name!r} is {s} but its sharding {sh} splits {len(counts)} "
                             "dimensions")
        dims = tuple(d * c for d, c in zip(dims, counts, strict=True))
    return Shape.array_shape(s.numpy_dtype(), dims)


class _Befores:
    """The before_optimizations modules of an optimized dump, each loaded once: ``before`` (given)
    first, then the files beside ``path``. Yields ``(label, module, file or None)``."""

    def __init__(self, path: str | os.PathLike[str] | None, before: XlaComputation | str | os.PathLike[str] | None
                 ) -> None:
        from ..formats.load import load_computation

        self._given = before if before is not None and not isinstance(before, (str, os.PathLike)) else None
        given = [os.fspath(before)] if isinstance(before, (str, os.PathLike)) else []
        self.paths = list(dict.fromkeys(given + (before_files(path) if path is not None else [])))
        # a file the caller named must load (FormatError); those found beside the dump are tried
        self._loaded: dict[str, XlaComputation | None] = {given[0]: load_computation(given[0])} if given else {}

    def __iter__(self) -> Iterator[tuple[str, XlaComputation, str | None]]:
        from ..formats.load import load_computation

        if self._given is not None:
            yield f"module {self._given.name!r}", self._given, None
        for c in self.paths:
            if c not in self._loaded:
                try:
                    self._loaded[c] = load_computation(c)
                except XlaSdkError:
                    self._loaded[c] = None
            loaded = self._loaded[c]
            if loaded is not None:
                yield c, loaded, c

    def first(self) -> tuple[str, XlaComputation, str | None] | None:
        return next(iter(self), None)


def _before_parameter_shardings(local: list[Shape], devices: int, befores: _Befores
                                ) -> tuple[list[HloSharding], list[Shape], str] | None:
    """``(shardings, global shapes, source)`` of the parameters (per-partition shapes ``local``) from
    a before_optimizations module of as many parameters whose shardings split its global shapes
    into ``local``; None when none does."""
    for c, loaded, _ in befores:
        shapes = list(loaded.program_shape().parameter_shapes())
        if len(shapes) != len(local):
            continue
        part = loaded.partitioning()
        texts: list[str | None] = list(part.parameter_shardings)
        source = f"the parameter shardings of {c}"
        if not all(texts):  # XLA's propagation chose them: compiled, the before_optimizations program says which
            try:
                texts = list(_compiled_shardings(loaded, devices)[0])
            except XlaSdkError:
                continue
            source = f"the parameter shardings XLA gives {c} (compiled for {devices} partitions)"
        try:
            shardings = [HloSharding.parse(t or "{replicated}", meshes=part.meshes) for t in texts]
            fits = all(not g.is_array() or (s.is_array() and tuple(sh.tile_shape(g)) == tuple(s.dimensions()))
                       for g, s, sh in zip(shapes, local, shardings, strict=True))
        except XlaSdkError:
            continue
        if fits:
            return shardings, shapes, source
    return None


def _result_shardings(comp: XlaComputation, devices: int, befores: _Befores
                      ) -> tuple[list[HloSharding] | None, list[tuple[int, ...]] | None, str]:
    """The results' shardings and global dimensions: the before_optimizations module's, else the
    module's own (a ROOT sharding); ``(None, None, why)`` when none says."""
    local = _leaves(comp.program_shape().result_shape())
    n_out = len(local)
    part = comp.partitioning()
    own = part.result_shardings
    unfit: list[str] = []
    for c, loaded, _ in befores:
        lpart = loaded.partitioning()
        shardings: list[str | None] = list(lpart.result_shardings)
        shapes = _leaves(loaded.program_shape().result_shape())
        if len(shapes) != n_out or len(shardings) != n_out:
            continue
        source = f"the result shardings of {c}"
        if not all(shardings):
            # an unannotated result: XLA's sharding propagation chose its sharding; compiled, the
            # before_optimizations program says which
            try:
                shardings = list(_compiled_shardings(loaded, devices)[1])
            except XlaSdkError:
                continue
            source = f"the result shardings XLA gives {c} (compiled for {devices} partitions)"
        try:
            parsed = [HloSharding.parse(s, meshes=lpart.meshes) for s in shardings if s is not None]
            fits = all(not g.is_array() or (s.is_array() and tuple(sh.tile_shape(g)) == tuple(s.dimensions()))
                       for g, s, sh in zip(shapes, local, parsed, strict=True))
        except XlaSdkError:
            continue
        if not fits:  # they do not split its results into the dump's (another XLA's propagation): never a guess
            unfit.append(source)
            continue
        return parsed, [tuple(s.dimensions()) for s in shapes], source
    if own and len(own) == n_out and all(own):
        # the module's own ROOT shardings: global dimensions from the per-partition ones
        parsed = [HloSharding.parse(s, meshes=part.meshes) for s in own if s is not None]
        dims = []
        for s, sh in zip(_leaves(comp.program_shape().result_shape()), parsed, strict=True):
            d = tuple(s.dimensions())
            dims.append(tuple(x * c for x, c in zip(d, sh.tile_counts, strict=True)) if sh.is_tiled else d)
        return parsed, dims, "the module's result shardings"
    if unfit:
        return None, None, (f"the optimized module does not record its result shardings and {'; '.join(unfit)} do "
                            "not split the program's results into the module's")
    return None, None, ("the optimized module does not record its result shardings and no before_optimizations "
                        "file lies beside it")


def _compiled_shardings(comp: XlaComputation, devices: int) -> tuple[list[str], list[str]]:
    """The parameter and result shardings of ``comp`` compiled for ``devices`` partitions (after
    XLA's propagation)."""
    from ._compile import compile as _compile
    from ._options import CompileOptions
    from .device import client

    first = client("cpu", num_devices=devices).devices()[0]
    exe = _compile(comp, first, options=CompileOptions(num_partitions=devices))
    in_texts, out_texts = pjrt.executable_shardings(exe._exe)  # what execute_sharded reads (runtime.sharded)
    if not out_texts or not in_texts:
        raise XlaSdkError("the compiled program reports no shardings")
    return [str(t) for t in in_texts], [str(t) for t in out_texts]


def _leaves(shape: Shape) -> list[Shape]:
    return [x for e in shape.tuple_shapes() for x in _leaves(e)] if shape.is_tuple() else [shape]


def _piece(v: Array, sharding: HloSharding, k: int, devices: int) -> Array:
    """Partition ``k``'s piece of the global array ``v`` (padded to the tile shape, as XLA expects)."""
    sl = sharding.shard_slices(v.shape, devices)[k]
    if sl is None:
        return np.zeros(sharding.tile_shape(v.shape), v.dtype)
    piece = v[sl]
    tile = sharding.tile_shape(v.shape)
    if piece.shape != tile:
        piece = np.pad(piece, [(0, t - s) for t, s in zip(tile, piece.shape, strict=True)])
    return np.ascontiguousarray(piece)


def _assemble(name: str, per_device: list[list[Array]], shardings: Sequence[HloSharding],
              all_dims: Sequence[tuple[int, ...]], devices: int, error: type[XlaSdkError], what: str) -> list[Array]:
    """Each global array from every partition's pieces; the partitions that hold one tile agree."""
    outs = []
    for i, (sh, dims) in enumerate(zip(shardings, all_dims, strict=True)):
        pieces = [d[i] for d in per_device]
        out = np.zeros(dims, pieces[0].dtype)
        seen: dict[tuple[int, ...], Array] = {}
        for k, sl in enumerate(sh.shard_slices(dims, devices)):
            if sl is None:
                continue
            piece = pieces[k][tuple(slice(0, s.stop - s.start) for s in sl)]
            key = tuple(s.start for s in sl)
            if key in seen:
                if seen[key].tobytes() != piece.tobytes():
                    raise error(
                        f"{name}: {what} {i} ({sh}): partition {k}'s piece differs from another partition's piece "
                        f"of the same tile; the {what}s cannot be put together (run with per-partition inputs to see "
                        "each partition's values)")
                continue
            seen[key] = piece
            out[sl] = piece
        outs.append(out)
    return outs
