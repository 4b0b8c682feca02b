"""``bisect="ops"`` of an optimized per-partition dump (one partition's program of an SPMD program,
:mod:`xlasdk.runtime.per_partition`): the first instruction that introduces a divergence, and in
which partitions.

The reference is the per-partition module itself, evaluated on every partition at once
(:func:`~xlasdk.reference.collectives.on_every_device`: one simulated device per partition, their
collectives meeting, ``partition-id`` each its own), from each partition's pieces of the program's
global inputs. The device runs are the module cut after a candidate instruction
(:meth:`XlaComputation.with_outputs`), compiled for ``1 x N`` partitions and run on ``N`` devices
(:meth:`Executable.execute_replicated`). The search is the single-device one
(:mod:`xlasdk.reference._bisect_core`: a binary search over the topological order), a cut
diverging where any partition's value departs from that partition's reference value; the
instruction found is blamed when, on the device's operand values of each partition (all of them at
once for a collective), its rule gives another value than the device's in some partition: the
report names the instruction and those partitions; a culprit that calls a function (a fusion of the
optimized dump) is searched inside, the function a per-partition program of its own on every
partition's device operand values (the report's path: ``fusion.3 > called function > multiply.1``).

With ``good`` (the per-partition module of the same program that computes it right, ``compare
--against GOOD.hlo``), the reference values are that module's, on every partition, its
instructions paired with this one's by name: a bug in the module itself (a constant changed, an op
that errs only where ``partition-id`` is ``k``) is named (not searched inside).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._bisect_core import _OPS_METHOD, OpsBisection, _CutFailed, _Program

if TYPE_CHECKING:
    from ..builder import XlaOp
    from ..program.computation import XlaComputation
    from ..program.graph_import import Instruction
    from ..runtime import CompileOptions
    from ..runtime.device import Device
    from ..runtime.per_partition import PerPartitionPlan
    from ._settings import CompareSettings

__all__ = ["bisect_ops_per_partition"]

Array = np.ndarray[Any, Any]

def bisect_ops_per_partition(plan: PerPartitionPlan, pieces: Sequence[Sequence[Any]], settings: CompareSettings,
                             options: CompileOptions | None = None, *, good: XlaComputation | None = None,
                             diverged: bool | None = None) -> OpsBisection:
    """The first instruction of ``plan``'s per-partition module that introduces a divergence of
    some partition's values from the reference evaluator's (see the module's docstring), from each
    partition's arguments ``pieces``. ``options``: the comparison's compile options (its flags);
    ``good``: a per-partition module of the same program whose values are right (the reference
    evaluates it instead, its instructions paired with this one's by name); ``diverged``: whether
    the outputs diverge, when the caller knows.

    Raises
    ------
    UnsupportedOpError
        An op has no reference rule.
    """
    p = _Partitioned(plan.computation, plan.num_partitions, plan.device_for(settings.device), pieces, settings,
                     options, good)
    try:
        return _search(p, settings.say, diverged)
    except _CutFailed as e:
        return OpsBisection("not localised", compiles=p.compiles, method=_METHOD,
                            note=f"a program cut out of this one could not be compiled or run ({e}); nothing is "
                                 "blamed")


_METHOD = _OPS_METHOD + ", each cut run on every partition"
#: how deep the search follows calls inside calls
MAX_DEPTH = 8


class _Partitioned:
    """The per-partition module, one :class:`_Program` per partition (each with that partition's
    arguments and reference values), and its cuts run on every partition. With ``good``, the
    reference values are ``good``'s, by instruction name (then the outputs by position)."""

    def __init__(self, comp: XlaComputation, n: int, device: Device, pieces: Sequence[Sequence[Any]],
                 settings: CompareSettings, options: CompileOptions | None, good: XlaComputation | None) -> None:
        from ..runtime import CompileOptions

        self.n = n
        self.comp = comp
        self.good = good
        self.settings, self.flags = settings, options
        self.progs = [_Program(self.comp, row, settings, options, need_reference=False) for row in pieces]
        self.base = self.progs[0]
        self.device = device
        opts = CompileOptions(num_replicas=1, num_partitions=self.n)
        if options is not None:
            opts.env_option_overrides = options.env_option_overrides
        self.options = opts
        self.compiles = 0
        #: this module's values (by node id) -> ``good``'s nodes that hold their reference values
        self.pairs: dict[int, XlaOp] = {}
        self.unpaired: set[str] = set()
        self._reference(settings, pieces)

    def _pair(self, other: _Program) -> None:
        """``self.pairs``: each value of this module paired with ``other``'s of the same instruction
        name and position, shape and element type; the outputs by position."""
        base = self.base
        theirs = {i.name: other.slots[i.index] for i in other.instrs}
        for ins in base.instrs:
            mine, match = base.slots[ins.index], theirs.get(ins.name)
            if ins.opcode == "parameter" or not mine:
                continue
            if match is None or len(match) != len(mine) or any(
                    str(a.shape) != str(b.shape) for a, b in zip(mine, match, strict=True)):
                self.unpaired.add(ins.name)
                continue
            self.pairs.update({id(a): b for a, b in zip(mine, match, strict=True)})
        for a, b in zip(base.graph.outputs, other.graph.outputs, strict=False):
            if a.shape.is_array() and str(a.shape) == str(b.shape):
                self.pairs.setdefault(id(a), b)

    def _reference(self, settings: CompareSettings, pieces: Sequence[Sequence[Any]]) -> None:
        from ._bounds import error_bounds
        from ._walk import Evaluator
        from .collectives import on_every_device

        src = self.base if self.good is None else _Program(self.good, pieces[0], settings, None,
                                                           need_reference=False)
        if self.good is not None:
            self._pair(src)
        comp, g = src.comp, src.graph
        roots = [n for i in src.instrs for n in src.slots[i.index]] + [*g.outputs, *g.effects]

        def body(k: int, callees: Any) -> tuple[dict[int, Any], dict[int, Any]]:
            env: dict[int, Any] = {id(q): a for q, a in zip(g.params, self.progs[k].args, strict=True)}
            ev = Evaluator(comp)
            ev.callees = callees
            ev.model, ev.precision = settings.kind, settings.precision
            ev.run_graph(roots, env)
            return env, error_bounds(roots, env, ev)

        for prog, (env, bounds) in zip(self.progs, on_every_device(comp, body, 1, self.n), strict=True):
            if self.good is None:
                prog.ref, prog.bounds = env, bounds
                continue
            own = {id(q): a for q, a in zip(prog.graph.params, prog.args, strict=True)}
            prog.ref = {**own, **{k: env[id(b)] for k, b in self.pairs.items() if id(b) in env}}
            prog.bounds = {k: bounds[id(b)] for k, b in self.pairs.items() if id(b) in bounds}

    def run(self, nodes: Sequence[XlaOp]) -> list[list[Array]]:
        """Each partition's device values of ``nodes``, from one compile of the module with them as
        outputs, run on every partition. Raises :class:`_CutFailed` when it does not compile or run."""
        from ..runtime import compile as _compile

        self.compiles += 1
        try:
            exe = _compile(self.comp.with_outputs(list(nodes)), self.device, options=self.options)
            rows = exe.execute_replicated([p.args for p in self.progs])
        except Exception as e:  # noqa: BLE001 - reported as what stopped the search, never as a culprit
            raise _CutFailed(f"{type(e).__name__}: {' '.join(str(e).split())[:300]}") from e
        return [[np.asarray(o.to_numpy()) for o in (r if isinstance(r, (tuple, list)) else (r,))] for r in rows]

    def departs(self, k: int, node: XlaOp, got: Array) -> bool:
        """Whether partition ``k``'s device value ``got`` of ``node`` departs from its reference
        value (a value without one, unpaired in ``good``, never does)."""
        prog = self.progs[k]
        return id(node) in prog.ref and not prog.check(node, got, prog.ref[id(node)]).ok

    def diverging(self, nodes: Sequence[XlaOp], got: Sequence[Sequence[Array]]) -> list[int]:
        """The partitions in which some of ``nodes`` departs from the reference."""
        return [k for k, row in enumerate(got) if any(self.departs(k, n, g) for n, g in zip(nodes, row, strict=True))]


def _search(p: _Partitioned, say: Callable[[str], None], diverged: bool | None, depth: int = 0) -> OpsBisection:
    base = p.base
    outs = [o for o in base.graph.outputs if o.shape.is_array()]
    if not outs:
        return OpsBisection("no divergence", note="the program has no array output")
    if diverged is None:
        diverged = bool(p.diverging(outs, p.run(outs)))
    if not diverged:
        return OpsBisection("no divergence", compiles=p.compiles, method=_METHOD)
    n_ins = len(base.instrs)
    lo, hi = base.nparams - 1, n_ins - 1
    values: dict[int, list[dict[int, Any]]] = {lo: [{} for _ in range(p.n)]}
    top = base.cut(hi)
    got = p.run(top)
    if not p.diverging(top, got):
        return OpsBisection("not localised", compiles=p.compiles, method=_METHOD,
                            note="the outputs match the reference when the module is recompiled with them as "
                                 "with_outputs gives them (XLA compiles it differently)")
    values[hi] = [{id(n): g for n, g in zip(top, row, strict=True)} for row in got]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        nodes = base.cut(mid)
        say(f"bisect ops: instructions {lo + 1}..{hi} of {n_ins}, trying the cut after {base.instrs[mid].name} "
            f"on {p.n} partitions")
        got = p.run(nodes)
        vals = [{id(n): g for n, g in zip(nodes, row, strict=True)} for row in got]
        if p.diverging(nodes, got):
            hi, values[hi] = mid, vals
        else:
            lo, values[lo] = mid, vals
    return _blame(p, base.instrs[hi], values[lo], values[hi], say, depth)


def _blame(p: _Partitioned, ins: Instruction, before: list[dict[int, Any]], after: list[dict[int, Any]],
           say: Callable[[str], None], depth: int = 0) -> OpsBisection:
    """The verdict on ``ins``, where the values first depart: its rule on each partition's device
    operand values (``before``) against its device values (``after``)."""
    from ._walk import Evaluator
    from .collectives import on_every_device

    base = p.base
    for k, prog in enumerate(p.progs):
        before[k].update({id(q): a for q, a in zip(base.graph.params, prog.args, strict=True)})
    op_inputs = [x for x in base.main_inputs(ins.op) if x.shape.is_array()]
    slots = base.slots[ins.index]
    departing = [k for k in range(p.n) if any(p.departs(k, n, after[k][id(n)]) for n in slots if id(n) in after[k])]
    if any(id(x) not in before[k] for x in op_inputs for k in range(p.n)) or not slots or any(
            id(n) not in after[k] for n in slots for k in range(p.n)):
        return OpsBisection("not localised", compiles=p.compiles, method=_METHOD, first_divergent=ins.name,
                            note=f"the divergence appears at {ins.name} ({ins.opcode}) in {_partitions(departing, p.n)}"
                                 ", but its operands' device values could not be read")
    if p.good is not None:
        return _blame_against(p, ins, before, after, departing)

    def rule(k: int, callees: Any) -> dict[int, Any]:
        env = {id(x): before[k][id(x)] for x in op_inputs}
        ev = Evaluator(p.comp)
        ev.callees = callees
        ev.run_graph(slots, env)
        return env

    envs = on_every_device(p.comp, rule, 1, p.n)
    bad: list[tuple[int, Any]] = []
    for k, (prog, env) in enumerate(zip(p.progs, envs, strict=True)):
        errors = [prog.check(n, after[k][id(n)], env[id(n)], {**prog.ref, **env}) for n in slots]
        worst = next((e for e in errors if not e.ok), None)
        if worst is not None:
            bad.append((k, worst))
    if not bad:
        return OpsBisection(
            "not localised", compiles=p.compiles, method=_METHOD, first_divergent=ins.name,
            note=f"the values first depart from the reference at {ins.name} ({ins.opcode}) in "
                 f"{_partitions(departing, p.n)}, but it computes what its rule gives on the device's operand values "
                 "in every partition (XLA optimizes across the ops before it, or their rounding errors, within "
                 "tolerance, are amplified); no instruction is blamed")
    k, error = bad[0]
    prog, env = p.progs[k], envs[k]
    values = [after[k][id(n)] for n in slots]
    culprit = prog.culprit(ins, {id(x): env[id(x)] for x in ins.op.operands if id(x) in env},
                           values[0] if len(values) == 1 else None, error)
    ks = [b[0] for b in bad]
    note = (f"{ins.name} computes another value than its rule on the device's operand values in "
            f"{_partitions(ks, p.n)}; the operand and result values shown are partition {k}'s")
    found = OpsBisection("localised", culprit, "", [], p.compiles, _METHOD, note, first_divergent=ins.name,
                         partitions=ks)
    if ins.op.opcode == "func.call" and depth < MAX_DEPTH:
        say(f"bisect ops: {ins.name} departs from its rule; going inside its called function on every partition")
        _into_call(p, ins, before, found, say, depth)
    found.compiles = p.compiles
    return found


def _into_call(p: _Partitioned, ins: Instruction, before: list[dict[int, Any]], found: OpsBisection,
               say: Callable[[str], None], depth: int) -> None:
    """``found`` (``ins``, a call: a fusion of the optimized dump, blamed) with the search carried
    inside its called function, a per-partition program of its own on every partition's device
    operand values (``found.region``/``found.inside``); what stops it is added to the note."""
    from ._bisect_regions import _called_computation

    try:
        sub = _called_computation(p.base, ins)
        pieces = [[before[k][id(x)] for x in ins.op.operands] for k in range(p.n)]
        q = _Partitioned(sub, p.n, p.device, pieces, p.settings, p.flags, None)
        try:
            inside = _search(q, say, True, depth + 1)
        except _CutFailed as e:
            inside = OpsBisection("not localised", compiles=q.compiles, method=_METHOD,
                                  note=f"a program cut out of the called function could not be compiled or run ({e})")
        p.compiles += q.compiles
    except Exception as e:  # noqa: BLE001 - the culprit stands; what stopped the descent is said
        found.note += (f"; the search could not go inside {ins.name}: {type(e).__name__}: "
                       f"{' '.join(str(e).split())[:200]}")
        return
    found.region, found.inside = "called function", inside


def _blame_against(p: _Partitioned, ins: Instruction, before: list[dict[int, Any]], after: list[dict[int, Any]],
                   departing: list[int]) -> OpsBisection:
    """The verdict on ``ins`` against the good module: the values before it agree with the good
    module's on every partition, its own depart in ``departing``."""
    assert p.good is not None
    if not departing:
        return OpsBisection("not localised", compiles=p.compiles, method=_METHOD, first_divergent=ins.name,
                            note=f"the values first depart from {p.good.name!r}'s after {ins.name} ({ins.opcode}), "
                                 "but no value of it departs (the cuts' compiles round differently)")
    k = departing[0]
    prog, slots = p.progs[k], p.base.slots[ins.index]
    error = next(c for c in (prog.check(n, after[k][id(n)], prog.ref[id(n)]) for n in slots if id(n) in prog.ref)
                 if not c.ok)
    operands = {id(x): before[k][id(x)] for x in ins.op.operands if id(x) in before[k]}
    values = [after[k][id(n)] for n in slots]
    culprit = prog.culprit(ins, operands, values[0] if len(values) == 1 else None, error)
    reads = sorted({p.base.graph.instruction_of(x).name for x in p.base.main_inputs(ins.op)
                    if p.base.graph.instruction_of(x).name in p.unpaired})
    extra = (f"; it reads {', '.join(reads)}, which {p.good.name!r} has no instruction of the same name and shape "
             "for (the values there are not compared)") if reads else ""
    note = (f"{ins.name} departs from the same instruction of the module compared against in "
            f"{_partitions(departing, p.n)}, the values before it agreeing in every partition{extra}; the operand and "
            f"result values shown are partition {k}'s")
    return OpsBisection("localised", culprit, "", [], p.compiles, _METHOD + f", against {p.good.name!r}", note,
                        first_divergent=ins.name, partitions=departing)


def _partitions(ks: Sequence[int], n: int) -> str:
    if not ks:
        return f"no partition of {n} (only in the cut's outputs together)"
    if len(ks) == n:
        return f"every partition ({n})"
    shown = ", ".join(str(k) for k in ks[:16]) + (f", ... ({len(ks)} in all)" if len(ks) > 16 else "")
    return f"partition{'s' if len(ks) > 1 else ''} {shown} of {n}"
