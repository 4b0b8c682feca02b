"""``xlasdk run`` of an optimized per-partition dump (XLA's ``*after_optimizations*`` module of a program
its SPMD partitioner split over several devices: one partition's program).

The same ``--inputs`` file serves the before- and the after-optimizations files: the program's
*global* arrays are split by each parameter's sharding (the ``sharding={...}`` the dump keeps on
its parameters; XLA of jaxlib 0.12 keeps none, and they are then the before file's, below), as
JAX splits its inputs, each partition runs the program on its own pieces
(``Executable.execute_replicated``), and the outputs are put together by the result shardings,
which the optimized module does not keep: they are read from the ``before_optimizations`` file XLA
wrote beside it (``module_0000.jit_f.before_optimizations.txt`` for
``module_0000.jit_f.cpu_after_optimizations.txt``). Without it, or with per-partition inputs, each
output is written per partition (a leading axis of one entry per partition). Shardings in every
notation XLA writes are read (``{devices=[4,1]<=[4]}``, ``{mesh['x'=4], [{'x'}, {}]}``, Shardy's).

Per-partition inputs stay possible: one partition's array (every partition gets it), or the
arrays of every partition stacked on a leading axis (partition ``k`` gets entry ``k``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from ._arrays import _describe_array, _gather_inputs, _npz_entries, _summary
from ._common import EXIT_OK, UsageError, _api, _human_time, _npz_path, _stage

_AFTER = re.compile(r"(?:cpu_|gpu_|tpu_)?after_optimizations")


@dataclass
class _Plan:
    devices: int
    names: list[str]
    local: list[Any]  # per-partition parameter shapes (xs.Shape)
    shardings: list[Any]  # each parameter's HloSharding (replicated where the dump has none)
    global_shapes: list[Any]  # the parameters' global shapes
    out_shardings: list[Any] | None  # each result's HloSharding, None when unknown
    out_dims: list[tuple[int, ...]] | None  # each result's global dimensions
    out_source: str  # where the result shardings were read
    in_source: str | None = "the dump's parameter shardings"  # where they were read; None: nowhere (unknown)


class _ShapesOf:
    """What ``_gather_inputs`` reads of a program shape: names and shapes."""

    def __init__(self, names: list[str], shapes: list[Any]) -> None:
        self._names, self._shapes = names, shapes

    def parameter_names(self) -> list[str]:
        return self._names

    def parameter_shapes(self) -> list[Any]:
        return self._shapes


def per_partition_devices_of(comp: Any) -> int | None:
    """The device count of ``comp`` when it is an optimized per-partition dump, else None."""
    from xlasdk.program.computation import compile_request
    from xlasdk.runtime.isolated_compile import per_partition_devices

    text = compile_request(comp).module_text
    n = per_partition_devices(text)
    if n is None and "mhlo.fusion" in text:
        p = comp.partitioning().num_partitions
        n = p if p is not None and p > 1 else None
    return n


def plan_for(path: str, comp: Any, devices: int, before: str | None = None) -> _Plan:
    """How to split the global inputs of the per-partition program ``comp`` (from ``path``) and put
    its outputs together: its parameters' shardings are its own, else (XLA of jaxlib 0.12 writes
    none into an optimized module) those of the before_optimizations file ``before`` or the one
    beside it (:func:`before_files`)."""
    ps = comp.program_shape()
    names = list(ps.parameter_names())
    local = list(ps.parameter_shapes())
    part = comp.partitioning()
    texts = list(part.parameter_shardings) + [None] * (len(names) - len(part.parameter_shardings))
    befores = _Befores(path, before)
    in_source: str | None = "the dump's parameter shardings"
    if any(texts[: len(names)]) or not names:
        shardings = [_parse(path, s, part.meshes) if s else _replicated() for s in texts[: len(names)]]
        global_shapes = [_global_shape(path, n, s, sh) for n, s, sh in zip(names, local, shardings, strict=True)]
    else:
        found = _before_parameter_shardings(comp, devices, befores)
        if found is not None:
            shardings, global_shapes, in_source = found
        else:
            shardings, global_shapes, in_source = [_replicated() for _ in names], list(local), None
    out_shardings, out_dims, source = _result_shardings(comp, devices, befores)
    return _Plan(devices, names, local, shardings, global_shapes, out_shardings, out_dims, source, in_source)


def _replicated() -> Any:
    import xlasdk as xs

    return xs.HloSharding.replicate()


def _parse(path: str, text: str, meshes: Any) -> Any:
    import xlasdk as xs

    try:
        return xs.HloSharding.parse(text, meshes=meshes)
    except xs.ShapeError as e:
        raise UsageError(f"{path}: {e}") from None


def _global_shape(path: str, name: str, s: Any, sh: Any) -> Any:
    """The global shape of a parameter of per-partition shape ``s`` and sharding ``sh``."""
    import xlasdk as xs

    if not s.is_array():
        return s
    dims = tuple(s.dimensions())
    if sh.is_tiled:
        counts = sh.tile_counts
        if len(counts) != len(dims):
            raise UsageError(f"{path}: parameter {name!r} is {s} but its sharding {sh} splits {len(counts)} "
                             "dimensions")
        dims = tuple(d * c for d, c in zip(dims, counts, strict=True))
    return xs.Shape.array_shape(s.numpy_dtype(), dims)


def before_files(path: str) -> list[str]:
    """The ``before_optimizations`` files XLA would have written beside the optimized dump ``path``
    (those that exist)."""
    candidates = []
    base = os.path.basename(path)
    if _AFTER.search(base):
        for ext in ("", ".txt", ".hlo.pb"):
            name = _AFTER.sub("before_optimizations", base)
            if ext:
                name = re.sub(r"\.(txt|hlo\.pb|pb)$", "", name) + ext
            candidates.append(os.path.join(os.path.dirname(path), name))
    return [c for c in dict.fromkeys(candidates) if os.path.isfile(c)]


class _Befores:
    """The before_optimizations modules of an optimized dump, loaded once each: ``before`` (given)
    first, then those beside ``path``."""

    def __init__(self, path: str, before: str | None) -> None:
        self.paths = list(dict.fromkeys(([before] if before else []) + before_files(path)))
        self._loaded: dict[str, Any] = {}

    def __iter__(self) -> Any:
        import xlasdk as xs

        for c in self.paths:
            if c not in self._loaded:
                try:
                    self._loaded[c] = xs.load_computation(c) if os.path.isfile(c) else None
                except xs.XlaSdkError:
                    self._loaded[c] = None
            if self._loaded[c] is not None:
                yield c, self._loaded[c]


def _before_parameter_shardings(comp: Any, devices: int, befores: _Befores
                                ) -> tuple[list[Any], list[Any], str] | None:
    """``(shardings, global shapes, source)`` of ``comp``'s parameters from a before_optimizations
    module of as many parameters whose shardings split its global shapes into ``comp``'s; None
    when none does."""
    import xlasdk as xs

    local = list(comp.program_shape().parameter_shapes())
    for c, loaded in befores:
        shapes = list(loaded.program_shape().parameter_shapes())
        if len(shapes) != len(local):
            continue
        part = loaded.partitioning()
        texts: list[str | None] = list(part.parameter_shardings)
        source = f"the parameter shardings of {c}"
        if not all(texts):  # XLA's propagation chose them: compiled, the before_optimizations program says which
            try:
                texts = list(_compiled_shardings(loaded, devices)[0])
            except xs.XlaSdkError:
                continue
            source = f"the parameter shardings XLA gives {c} (compiled for {devices} partitions)"
        try:
            shardings = [xs.HloSharding.parse(t or "{replicated}", meshes=part.meshes) for t in texts]
            fits = all(not g.is_array() or (s.is_array() and tuple(sh.tile_shape(g)) == tuple(s.dimensions()))
                       for g, s, sh in zip(shapes, local, shardings, strict=True))
        except xs.XlaSdkError:
            continue
        if fits:
            return shardings, shapes, source
    return None


def _result_shardings(comp: Any, devices: int, befores: _Befores
                      ) -> tuple[list[Any] | None, list[tuple[int, ...]] | None, str]:
    """The results' shardings and global dimensions: the module's own (a ROOT sharding), else the
    ``before_optimizations`` file ``before`` or the one beside it; (None, None, why) when none says."""
    import xlasdk as xs

    n_out = len(_leaves(comp.program_shape().result_shape()))
    part = comp.partitioning()
    own = part.result_shardings
    for c, loaded in befores:
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
            except xs.XlaSdkError:
                continue
            source = f"the result shardings XLA gives {c} (compiled for {devices} partitions)"
        try:
            parsed = [xs.HloSharding.parse(s, meshes=lpart.meshes) for s in shardings if s is not None]
        except xs.ShapeError:
            continue
        return parsed, [tuple(s.dimensions()) for s in shapes], source
    if own and len(own) == n_out and all(own):
        # the module's own ROOT shardings: global dimensions from the per-partition ones
        parsed = [xs.HloSharding.parse(s, meshes=part.meshes) for s in own if s is not None]
        dims = []
        for s, sh in zip(_leaves(comp.program_shape().result_shape()), parsed, strict=True):
            d = tuple(s.dimensions())
            dims.append(tuple(x * c for x, c in zip(d, sh.tile_counts, strict=True)) if sh.is_tiled else d)
        return parsed, dims, "the module's result shardings"
    return None, None, ("the optimized module does not record its result shardings and no before_optimizations "
                        "file lies beside it")


def _compiled_shardings(comp: Any, devices: int) -> tuple[list[str], list[str]]:
    """The parameter and result shardings of ``comp`` compiled for ``devices`` partitions (after
    XLA's propagation)."""
    import xlasdk as xs
    from xlasdk._jaxlib import pjrt

    first = xs.client("cpu", num_devices=devices).devices()[0]
    exe = xs.compile(comp, first, options=xs.CompileOptions(num_partitions=devices))
    in_texts, out_texts = pjrt.executable_shardings(exe._exe)  # what execute_sharded reads (xlasdk.runtime.sharded)
    if not out_texts or not in_texts:
        raise xs.XlaSdkError("the compiled program reports no shardings")
    return [str(t) for t in in_texts], [str(t) for t in out_texts]


def _leaves(shape: Any) -> list[Any]:
    return [x for e in shape.tuple_shapes() for x in _leaves(e)] if shape.is_tuple() else [shape]


def gather(args: argparse.Namespace, comp: Any, plan: _Plan, seed: int | None = None
           ) -> tuple[list[list[np.ndarray[Any, Any]]], str]:
    """(each partition's arguments, ``"global"`` or ``"per-partition"``) from the inputs given."""
    first: UsageError | None = None
    if plan.in_source is not None:  # the parameters' shardings are known: global arrays first
        try:
            values = _gather_inputs(args, _ShapesOf(plan.names, plan.global_shapes), None, comp, seed=seed)
        except UsageError as e:
            if "must be" not in str(e):
                raise
            first = e
        else:
            return [[_piece(v, sh, k, plan) for v, sh in zip(values, plan.shardings, strict=True)]
                    for k in range(plan.devices)], "global"
    import xlasdk as xs

    stacked = [xs.Shape.array_shape(s.numpy_dtype(), (plan.devices, *s.dimensions())) for s in plan.local]
    for shapes, each in ((plan.local, False), (stacked, True)):
        try:
            values = _gather_inputs(args, _ShapesOf(plan.names, shapes), None, comp, seed=seed)
        except UsageError as e:
            if "must be" not in str(e):
                raise
            first = first or e
            continue
        return [[np.ascontiguousarray(v[k]) if each else v for v in values] for k in range(plan.devices)], \
            "per-partition"
    per_partition = (f"per-partition arrays: one partition's ({', '.join(str(s) for s in plan.local)}; every "
                     f"partition gets it) or {plan.devices} of them stacked on a leading axis")
    if plan.in_source is None:
        raise UsageError(
            f"{first}; {comp.name!r} is an optimized per-partition dump (one partition's program of {plan.devices}) "
            "whose parameters carry no sharding (XLA of jaxlib 0.12 writes none into an optimized module) and no "
            "before_optimizations file beside it says how the program's global arrays are split: give "
            f"{per_partition}, or put the program's before_optimizations file beside it (module.before_optimizations"
            ".txt for module.cpu_after_optimizations.txt) to give its global arrays") from None
    want = ", ".join(f"{n}: {g}" for n, g in zip(plan.names, plan.global_shapes, strict=True))
    raise UsageError(
        f"{first}; {comp.name!r} is an optimized per-partition dump (one partition's program of {plan.devices}): "
        f"give the program's global arrays ({want}), as for its before_optimizations file (split by "
        f"{plan.in_source}), or {per_partition}") from None


def _piece(v: np.ndarray[Any, Any], sharding: Any, k: int, plan: _Plan) -> np.ndarray[Any, Any]:
    """Partition ``k``'s piece of the global array ``v`` (padded to the tile shape, as XLA expects)."""
    sl = sharding.shard_slices(v.shape, plan.devices)[k]
    if sl is None:
        return np.zeros(sharding.tile_shape(v.shape), v.dtype)
    piece = v[sl]
    tile = sharding.tile_shape(v.shape)
    if piece.shape != tile:
        piece = np.pad(piece, [(0, t - s) for t, s in zip(tile, piece.shape, strict=True)])
    return np.ascontiguousarray(piece)


def put_together(name: str, per_device: list[list[np.ndarray[Any, Any]]], plan: _Plan
                 ) -> list[np.ndarray[Any, Any]]:
    """Each result's global array from every partition's pieces (the devices that hold the same
    tile must agree: a program whose replicas of a tile differ is reported, never one of them)."""
    assert plan.out_shardings is not None and plan.out_dims is not None
    outs = []
    for i, (sh, dims) in enumerate(zip(plan.out_shardings, plan.out_dims, strict=True)):
        pieces = [d[i] for d in per_device]
        dtype = pieces[0].dtype
        out = np.zeros(dims, dtype)
        seen: dict[tuple[int, ...], np.ndarray[Any, Any]] = {}
        slices = sh.shard_slices(dims, plan.devices)
        for k, sl in enumerate(slices):
            if sl is None:
                continue
            piece = pieces[k][tuple(slice(0, s.stop - s.start) for s in sl)]
            key = tuple(s.start for s in sl)
            if key in seen:
                if seen[key].tobytes() != piece.tobytes():
                    raise UsageError(
                        f"{name}: output {i} ({sh}): partition {k}'s piece differs from another partition's piece "
                        "of the same tile; the outputs cannot be put together (run with per-partition inputs to see "
                        "each partition's values)")
                continue
            seen[key] = piece
            out[sl] = piece
        outs.append(out)
    return outs


def run_per_partition(args: argparse.Namespace, comp: Any, devices: int, out: IO[str], *,
                      expected_of: Callable[..., tuple[list[Any], str]], report: Callable[..., bool],
                      device_of: Callable[[argparse.Namespace, int], Any], exit_divergence: int) -> int:
    """``xlasdk run`` of an optimized per-partition dump (see the module's docstring). ``cli._run``,
    which imports this module, hands over its ``--expect`` steps and device choice."""
    from xlasdk._atomic import atomic_write

    EXIT_DIVERGENCE, _expect_report, _expected, _spmd_device = (  # noqa: N806
        exit_divergence, report, expected_of, device_of)

    if args.record is not None:
        raise UsageError(f"--record: {args.file} is an optimized per-partition dump; record its "
                         "before_optimizations file instead")
    if (args.replicas or 1) != 1 or (args.partitions is not None and args.partitions != devices):
        raise UsageError(f"{args.file} is an optimized per-partition dump of {devices} partitions: it runs on "
                         f"{devices} partitions of 1 replica")
    plan = plan_for(args.file, comp, devices)
    per_device, mode = gather(args, comp, plan)
    n_out = len(_leaves(comp.program_shape().result_shape()))
    expected = _expected(args, None, n_out) if args.expect is not None else None
    rt = _api()
    dev = _spmd_device(args, devices)
    _stage("compiling")
    t0 = time.perf_counter()
    exe = rt.compile(comp, dev, options=rt.CompileOptions(num_replicas=1, num_partitions=devices))
    compile_s = time.perf_counter() - t0
    _stage("running")
    gathered = mode == "global" and plan.out_shardings is not None

    def call(per_dev: list[list[np.ndarray[Any, Any]]]) -> list[np.ndarray[Any, Any]]:
        outs = exe.execute_replicated(per_dev)
        host = [[np.asarray(o.to_numpy()) for o in (r if isinstance(r, (tuple, list)) else (r,))] for r in outs]
        if gathered:
            return put_together(comp.name, host, plan)
        return [np.stack([h[i] for h in host]) for i in range(n_out)]

    host = call(per_device)
    npz = None
    if args.output is not None:
        _stage("writing")
        npz = _npz_path(args.output)
        entries = _npz_entries(host)
        savez: Any = np.savez
        try:
            atomic_write(npz, lambda f: savez(f, **entries))
        except OSError as e:
            raise UsageError(f"--output {args.output}: cannot write: {e.strerror or e}") from None
    how = ("global inputs split by the parameters' shardings" if mode == "global" else "per-partition inputs")
    if mode == "global" and plan.in_source != "the dump's parameter shardings":
        how += f" ({plan.in_source})"
    out.write(f"{comp.name} (an optimized per-partition dump) on {devices} {dev.platform} devices (1 replica x "
              f"{devices} partitions), each partition on its own arguments: {len(plan.names)} input(s), {how}; "
              f"{n_out} output(s); compiled in {_human_time(compile_s)}\n")
    from xlasdk.formats.tpu_meaning import tpu_note

    if (note := tpu_note(comp)) is not None:
        out.write(f"  ran {note}\n")
    if gathered:
        out.write(f"  outputs put together by {plan.out_source}\n")
    else:
        why = "the inputs were per-partition" if mode != "global" else plan.out_source
        out.write(f"  outputs per partition (a leading axis of {devices}): {why}\n")
    for i, a in enumerate(host):
        sharding = f"  sharding {plan.out_shardings[i]}" if gathered and plan.out_shardings is not None else ""
        out.write(f"  output {i}: {_describe_array(a):<16} {_summary(a)}{sharding}\n")
    ok = _expect_report(args, comp, host, expected, out) if expected is not None else True
    for it in range(1, args.iterations):
        per_device, _ = gather(args, comp, plan, seed=args.seed + it)
        host = call(per_device)
        out.write(f"iteration {it} (seed {args.seed + it}):\n")
        for i, a in enumerate(host):
            out.write(f"  output {i}: {_describe_array(a):<16} {_summary(a)}\n")
        if expected is not None:
            ok = _expect_report(args, comp, host, expected, out) and ok
    if args.repeat > 1:
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            for r in exe.execute_replicated(per_device):
                for o in r if isinstance(r, (tuple, list)) else (r,):
                    o.block_until_ready()
            times.append(time.perf_counter() - t)
        out.write(f"  time per run over {args.repeat} runs: min {_human_time(min(times))}, "
                  f"median {_human_time(statistics.median(times))}\n")
    if npz is not None:
        out.write(f"  wrote {npz}\n")
    return EXIT_OK if ok else EXIT_DIVERGENCE
