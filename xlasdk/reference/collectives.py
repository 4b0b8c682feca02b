"""Reference rules of the collectives, simulated over replicas and partitions, and
:func:`evaluate_spmd`, which runs a program on every simulated device at once.

:func:`xlasdk.evaluate` runs a program as one device: replica 0 of 1, partition 0 of 1, where a
collective's group is that device alone (AllReduce, AllGather and ReduceScatter over one member
are the identity, CollectivePermute sends nothing unless a pair names device 0 to itself).
:func:`evaluate_spmd` runs one thread per device, each the ordinary evaluator on that device's
arguments; each collective is a meeting point (a rendezvous per op instance and per execution, so
that loops work) where the members of a group hand over their operands, and each member then
computes its own result from all of them. A device that waits longer than ``timeout`` (the
devices took different paths, or a group names a device that never comes) raises an
:class:`~xlasdk.XlaSdkError` naming the op and the devices it waited for, instead of hanging.

Who meets whom follows XLA's operation semantics (``CollectiveOpGroupMode``), devices numbered
replica-major (device ``r * num_partitions + p`` is replica ``r``, partition ``p``, as
:meth:`Executable.execute_replicated <xlasdk.Executable.execute_replicated>` orders them):

- AllReduce, AllGather, ReduceScatter: without a channel the groups hold replica ids and the
  members are those replicas of this device's partition (cross-replica); with a channel they
  hold replica ids and the members are every partition of those replicas, replica-major (cross-
  replica-and-partition); with a channel and ``use_global_device_ids`` they hold device ids
  (flattened). Empty groups: every replica.
- AllToAll, CollectivePermute: without a channel the ids are replica ids (cross-replica), with one
  partition ids, within this device's replica (cross-partition).

Floating-point reductions are computed in float64 (complex128) in group order and rounded once to
the element type; integers wrap around as XLA's do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .._mlir_attrs import I64Elements
from .._numbers import SECONDS
from .._optable import evaluates
from ..builder import XlaOp
from ..errors import CollectiveTimeoutError, ShapeError, XlaSdkError
from ..ops.collectives import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    COLLECTIVE_PERMUTE,
    PARTITION_ID,
    REDUCE_SCATTER,
    REPLICA_ID,
)
from ._evaluator import run_reference
from ._walk import Evaluator, Value, as_output, combiner, result_shapes, results_of

if TYPE_CHECKING:
    from ..program.computation import XlaComputation

__all__ = ["evaluate_spmd", "CollectiveTimeoutError"]

_T = TypeVar("_T")

#: how long a simulated device waits at a collective for the other members of its group, in seconds
DEFAULT_TIMEOUT = 60.0


class _Aborted(XlaSdkError):
    """Another simulated device failed, so this one stopped waiting (the other's error is raised)."""


class _Hub:
    """Where the devices of one :func:`evaluate_spmd` run meet: per (op, execution, group) a slot of
    the values handed over so far."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.cond = threading.Condition()
        self.slots: dict[tuple[Any, ...], dict[int, Any]] = {}
        self.reads: dict[tuple[Any, ...], int] = {}
        self.failed = False

    def fail(self) -> None:
        with self.cond:
            self.failed = True
            self.cond.notify_all()

    def exchange(self, key: tuple[Any, ...], me: int, group: tuple[int, ...], value: Any, what: str) -> list[Any]:
        full = (*key, group)
        with self.cond:
            slot = self.slots.setdefault(full, {})
            slot[me] = value
            self.cond.notify_all()
            done = self.cond.wait_for(lambda: self.failed or all(d in slot for d in group), self.timeout)
            if not done or (self.failed and not all(d in slot for d in group)):
                if self.failed:
                    raise _Aborted(f"{what}: stopped waiting, another device failed")
                missing = [d for d in group if d not in slot]
                raise CollectiveTimeoutError(
                    f"reference evaluator: {what}: device {me} waited {self.timeout:g} s for devices {missing} of its "
                    f"group {list(group)}, which never reached this op (the devices took different paths through "
                    "the program, or the group names a device that does not run it)")
            values = [slot[d] for d in group]
            self.reads[full] = self.reads.get(full, 0) + 1
            if self.reads[full] == len(group):  # every member has its values: free the slot
                del self.slots[full], self.reads[full]
        return values


@dataclass
class _Device:
    """The simulated device a thread evaluates as."""

    replica: int = 0
    partition: int = 0
    num_replicas: int = 1
    num_partitions: int = 1
    hub: _Hub | None = None
    counts: dict[int, int] = field(default_factory=dict)

    @property
    def index(self) -> int:
        return self.replica * self.num_partitions + self.partition


_LOCAL = threading.local()


def _device() -> _Device:
    dev = getattr(_LOCAL, "device", None)
    if dev is None:
        dev = _LOCAL.device = _Device()
    return dev


# -- who takes part ----------------------------------------------------------------------------------------
def _groups(o: XlaOp, ev: Evaluator, name: str) -> list[list[int]]:
    v = ev.attr(o, name)
    if v is None:
        return []
    if not isinstance(v, I64Elements):  # the mesh-axes form, kept as spelled
        raise ev.fail(o, f"with {name} {getattr(v, 'text', v)} has no evaluation rule (expected dense<...> groups)")
    arr = v.values
    if arr.size == 0:  # no groups: every device of the mode's kind
        return []
    rows = arr.reshape(arr.shape[0], -1) if arr.ndim == 2 else arr.reshape(1, -1)
    return [[int(i) for i in row if int(i) >= 0] for row in rows]  # -1 pads uneven groups


def _channel(o: XlaOp, ev: Evaluator) -> bool:
    ch = ev.attr(o, "channel_handle")  # a ChannelHandle
    return ch is not None and int(ch.handle) > 0


def _participants(o: XlaOp, ev: Evaluator, dev: _Device, *, partition_mode: bool) -> tuple[int, ...]:
    """The devices of ``dev``'s group for collective ``o``, in group order (see the module's doc).
    ``partition_mode``: AllToAll / CollectivePermute (a channel makes the ids partition ids)."""
    R, P = dev.num_replicas, dev.num_partitions
    groups = _groups(o, ev, "replica_groups")
    channel = _channel(o, ev)
    flattened = channel and ev.attr(o, "use_global_device_ids") is not None and not partition_mode
    if partition_mode and channel:
        kind, count, mine = "partition", P, dev.partition
        to_device: Callable[[int], list[int]] = lambda i: [dev.replica * P + i]  # noqa: E731
    elif flattened:
        kind, count, mine = "device", R * P, dev.index
        to_device = lambda i: [i]  # noqa: E731
    elif channel and not partition_mode:  # cross-replica-and-partition
        kind, count, mine = "replica", R, dev.replica
        to_device = lambda i: [i * P + p for p in range(P)]  # noqa: E731
    else:
        kind, count, mine = "replica", R, dev.replica
        to_device = lambda i: [i * P + dev.partition]  # noqa: E731
    groups = groups or [list(range(count))]
    bad = sorted({i for g in groups for i in g if i >= count})
    if bad:
        raise ev.fail(o, f"names {kind} ids {bad}, but the program runs on {count} {kind}(s) "
                         f"({R} replica(s) x {P} partition(s); xs.evaluate_spmd runs it on several)")
    mine_in = [g for g in groups if mine in g]
    if len(mine_in) != 1:
        raise ev.fail(o, f"with replica_groups {groups}: {kind} {mine} must be in exactly one group, "
                         f"it is in {len(mine_in)}")
    return tuple(d for i in mine_in[0] for d in to_device(i))


def _meet(o: XlaOp, ev: Evaluator, group: tuple[int, ...], value: Any) -> list[Any]:
    """Hand ``value`` to the other members of ``group`` at this execution of ``o``; their values
    (this device's included) in group order."""
    dev = _device()
    count = dev.counts.get(o.id, 0)
    dev.counts[o.id] = count + 1
    if dev.hub is None:
        if group != (dev.index,):  # pragma: no cover - _participants refuses ids beyond one device
            raise ev.fail(o, f"needs devices {list(group)}; xs.evaluate runs one device (use xs.evaluate_spmd)")
        return [value]
    return dev.hub.exchange((o.id, count), dev.index, group, value, f"{o.opcode} (op #{o.id}, execution {count})")


# -- rules ---------------------------------------------------------------------------------------------------
def _reduce_over(o: XlaOp, ev: Evaluator, values: list[np.ndarray[Any, Any]]) -> Any:
    """``values`` (one array per member, in group order) folded with ``o``'s reduction region, in
    float64 / complex128 for floats, exact for integers (not yet rounded)."""
    fold = combiner(o.regions[0], o, ev)
    acc = values[0]
    for v in values[1:]:
        acc = np.asarray(fold([acc], [v])[0])
    return acc


@evaluates(ALL_REDUCE)
def _all_reduce(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    group = _participants(o, ev, _device(), partition_mode=False)
    everyone = _meet(o, ev, group, list(a))
    shapes = result_shapes(o)
    outs = [as_output(_reduce_over(o, ev, [vals[k] for vals in everyone]), shapes[k]) for k in range(len(a))]
    return results_of(o, outs)


@evaluates(REDUCE_SCATTER)
def _reduce_scatter(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    dev = _device()
    group = _participants(o, ev, dev, partition_mode=False)
    everyone = _meet(o, ev, group, list(a))
    dim = int(ev.attr(o, "scatter_dimension"))
    me = group.index(dev.index)
    shapes = result_shapes(o)
    outs = []
    for k in range(len(a)):
        total = _reduce_over(o, ev, [vals[k] for vals in everyone])
        outs.append(as_output(np.split(np.asarray(total), len(group), axis=dim)[me], shapes[k]))
    return results_of(o, outs)


@evaluates(ALL_GATHER)
def _all_gather(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    group = _participants(o, ev, _device(), partition_mode=False)
    everyone = _meet(o, ev, group, list(a))
    dim = int(ev.attr(o, "all_gather_dim"))
    shapes = result_shapes(o)
    return results_of(o, [as_output(np.concatenate([vals[k] for vals in everyone], axis=dim), shapes[k])
                        for k in range(len(a))])


@evaluates(ALL_TO_ALL)
def _all_to_all(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    dev = _device()
    group = _participants(o, ev, dev, partition_mode=True)
    split, concat = int(ev.attr(o, "split_dimension")), int(ev.attr(o, "concat_dimension"))
    n = int(ev.attr(o, "split_count", len(group)))
    if n != len(group):
        raise ev.fail(o, f"with split_count {n} over a group of {len(group)} devices {list(group)}")
    everyone = _meet(o, ev, group, list(a))
    me = group.index(dev.index)
    shapes = result_shapes(o)
    return results_of(o, [as_output(np.concatenate([np.split(vals[k], n, axis=split)[me] for vals in everyone],
                                            axis=concat), shapes[k]) for k in range(len(a))])


@evaluates(COLLECTIVE_PERMUTE)
def _collective_permute(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    dev = _device()
    channel = _channel(o, ev)
    count, mine = (dev.num_partitions, dev.partition) if channel else (dev.num_replicas, dev.replica)
    pairs = [(int(s), int(t)) for s, t in ev.attr(o, "source_target_pairs").values.reshape(-1, 2)]
    bad = sorted({i for p in pairs for i in p if not 0 <= i < count})
    if bad:
        kind = "partition" if channel else "replica"
        raise ev.fail(o, f"names {kind} ids {bad} in source_target_pairs, but the program runs on {count} "
                         f"{kind}(s) (xs.evaluate_spmd runs it on several)")
    line = tuple(dev.replica * dev.num_partitions + i if channel else i * dev.num_partitions + dev.partition
                 for i in range(count))  # every device of this replica (channel) or partition (none)
    everyone = _meet(o, ev, line, a[0])
    sources = [s for s, t in pairs if t == mine]
    if not sources:  # no pair targets this device: zeros
        return as_output(np.zeros(np.shape(a[0]), np.asarray(a[0]).dtype), o.shape)
    return as_output(everyone[sources[0]], o.shape)


@evaluates(REPLICA_ID)
def _replica_id(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return as_output(np.uint32(_device().replica), o.shape)


@evaluates(PARTITION_ID)
def _partition_id(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return as_output(np.uint32(_device().partition), o.shape)


# -- running every device ------------------------------------------------------------------------------------
class _SharedCallees(dict[str, Any]):
    """The called functions' graphs, imported once for all simulated devices (the op nodes of a
    callee must be the same objects on every device: they name the meeting points)."""

    def __init__(self, comp: XlaComputation) -> None:
        super().__init__()
        self._comp = comp
        self._lock = threading.Lock()

    def get(self, name: str, default: Any = None) -> Any:
        from ..program.graph_import import import_graph

        with self._lock:
            if name not in self:
                self[name] = import_graph(self._comp.compiler_ir(), self._comp.name, name)
            return self[name]


def evaluate_spmd(
    computation: XlaComputation,
    per_device_args: Sequence[Sequence[Any]],
    *,
    num_replicas: int | None = None,
    num_partitions: int = 1,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[list[np.ndarray[Any, Any]]]:
    """The outputs of ``computation`` on every device of a multi-replica / multi-partition run,
    computed by the reference evaluator with its collectives simulated (XLA's SPMD/MPMD execution
    of one program on ``num_replicas * num_partitions`` devices, as
    :meth:`Executable.execute_replicated <xlasdk.Executable.execute_replicated>` runs it).

    Parameters
    ----------
    computation: an :class:`~xlasdk.XlaComputation`, built or loaded.
    per_device_args: one argument list per device, replica-major (device ``r * num_partitions + p``
        is replica ``r``, partition ``p``); each as :func:`xlasdk.evaluate` takes them (the
        parameters' shapes and element types).
    num_replicas: default ``len(per_device_args) // num_partitions``.
    num_partitions: partitions per replica (``>= 1``).
    timeout: seconds a device waits at a collective for the rest of its group before raising (> 0
        and <= 10**6).

    Returns
    -------
    One list of numpy arrays per device, in the same order, as :func:`xlasdk.evaluate` returns them.

    Raises
    ------
    ShapeError
        ``len(per_device_args)`` is not ``num_replicas * num_partitions``, a count below 1, a
        ``timeout`` that is not a number of seconds > 0 and <= 10**6, or a device's arguments are
        wrong (as :func:`xlasdk.evaluate`; the message names the device).
    CollectiveTimeoutError
        Devices did not meet at a collective within ``timeout`` (it names the op and the devices).
    UnsupportedOpError
        An op without a rule, or a collective whose groups or pairs name devices the run lacks.
    """
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions < 1:
        raise ShapeError(f"evaluate_spmd: num_partitions must be an int >= 1, got {num_partitions!r}")
    lists = [list(args) for args in per_device_args]
    if num_replicas is None:
        num_replicas = len(lists) // num_partitions
    if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
        raise ShapeError(f"evaluate_spmd: num_replicas must be an int >= 1, got {num_replicas!r} "
                         f"({len(lists)} argument lists for {num_partitions} partition(s))")
    if len(lists) != num_replicas * num_partitions:
        raise ShapeError(f"evaluate_spmd: {len(lists)} argument lists for {num_replicas} replica(s) x "
                         f"{num_partitions} partition(s); expected one per device ({num_replicas * num_partitions})")
    seconds = SECONDS.check(timeout, "evaluate_spmd: timeout", ShapeError)  # an inf wait overflowed
    results = on_every_device(computation, lambda i, callees: run_reference(
        computation, lists[i], scales=False, callees=callees)[0], num_replicas, num_partitions, seconds)
    return list(results)


def on_every_device(computation: XlaComputation, body: Callable[[int, Any], _T], num_replicas: int,
                    num_partitions: int, timeout: float = DEFAULT_TIMEOUT) -> list[_T]:
    """``body(i, callees)`` run as each simulated device ``i`` of ``num_replicas x num_partitions``
    (replica-major), one thread each, their collectives meeting (as :func:`evaluate_spmd` runs a
    program; ``callees``: the called functions' graphs, shared, for an evaluator's
    :attr:`~xlasdk.reference._walk.Evaluator.callees`). The first error a device raised is raised,
    naming the device (an error of a device that stopped because another failed comes last)."""
    computation.instruction_graph()  # imported once, before the threads share it
    count = num_replicas * num_partitions
    hub = _Hub(timeout)
    callees = _SharedCallees(computation)
    results: list[Any] = [None] * count
    errors: list[BaseException | None] = [None] * count

    def run(i: int) -> None:
        _LOCAL.device = _Device(i // num_partitions, i % num_partitions, num_replicas, num_partitions, hub)
        try:
            results[i] = body(i, callees)
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            errors[i] = e
            hub.fail()
        finally:
            _LOCAL.device = None

    threads = [threading.Thread(target=run, args=(i,), name=f"xlasdk-device-{i}", daemon=True)
               for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((i for i, e in enumerate(errors) if e is not None and not isinstance(e, _Aborted)), None)
    if first is None:
        first = next((i for i, e in enumerate(errors) if e is not None), None)
    if first is not None:
        e = errors[first]
        assert e is not None
        r, p = divmod(first, num_partitions)
        try:  # the same error, naming the device
            named = type(e)(f"device {first} (replica {r}, partition {p}): {e}") if isinstance(e, XlaSdkError) else e
        except Exception:  # noqa: BLE001 - an error class that takes other arguments: as it came
            named = e
        raise named from (e if named is not e else None)
    return results

