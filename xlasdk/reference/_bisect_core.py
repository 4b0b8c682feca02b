"""The ops bisection's engine (:mod:`xlasdk.reference.bisect` is its face and has the whole story):
the program and its cuts, the culprit and its evidence, the search over the topological order."""


from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .._optable import GET_TUPLE_ELEMENT
from ..builder import XlaOp
from ..errors import XlaSdkError
from ..program.walk import closure
from ._settings import CompareSettings, refuse_both

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ..program.graph_import import Instruction
    from ..runtime import CompileOptions
    from ._report import OutputComparison
    from ._settings import DeviceLike


BISECT_MODES = ("ops", "passes")

#: the region descent :func:`_bisect_ops` is given (``_bisect_regions.descend``)
Descend = Callable[["_Program", "Instruction", dict[int, Any], "OpsBisection", Callable[[str], None], int],
                   "OpsBisection"]


# -- reports -----------------------------------------------------------------------------------------------------
def _summary(a: Any, n: int = 6) -> str:
    """A short text of an array: shape, element type and its first ``n`` values."""
    arr = np.asarray(a)
    flat = arr.reshape(-1)
    head = ", ".join(str(v) for v in flat[:n].tolist()) + (", ..." if flat.size > n else "")
    return f"{arr.dtype}{list(arr.shape)} [{head}]"


@dataclass
class Culprit:
    """An instruction of the program (as :meth:`XlaComputation.instructions` names it).

    ``hlo_line``: the instruction in HLO text (operands by their instruction names);
    ``source``: ``file:line`` of the user's code from the op's metadata ('' when it has none);
    ``error``: how its device value compares with the reference on the device's operand values
    (:class:`~xlasdk.OutputComparison`; ``None`` for a non-finite value found without a rule);
    ``operands``/``value``: short texts of the operand and result values on the device.
    """

    name: str
    opcode: str
    index: int
    hlo_line: str
    source: str
    op_name: str
    error: OutputComparison | None
    operands: dict[str, str] = field(default_factory=dict)
    value: str = ""

    def as_dict(self) -> dict[str, Any]:
        e = self.error
        return {"name": self.name, "opcode": self.opcode, "index": self.index, "hlo_line": self.hlo_line,
                "source": self.source, "op_name": self.op_name, "operands": self.operands, "value": self.value,
                "error": None if e is None else {
                    "max_abs": e.max_abs, "max_rel": e.max_rel, "max_ulp": e.max_ulp, "mismatches": e.mismatches,
                    "first_mismatch": None if e.first_mismatch is None else list(e.first_mismatch)}}

    def lines(self) -> list[str]:
        out = [f"    {self.name} ({self.opcode}, instruction {self.index})"
               + (f" at {self.source}" if self.source else "") + (f" [{self.op_name}]" if self.op_name else ""),
               f"    HLO: {self.hlo_line}"]
        if self.error is not None:
            e = self.error
            out.append(f"    its error against its rule on the device's operands: max abs {e.max_abs:.3g}, max rel "
                       f"{e.max_rel:.3g}, max ulp {e.max_ulp:.3g}, {e.mismatches} mismatches, first at "
                       f"{None if e.first_mismatch is None else list(e.first_mismatch)}")
        for k, v in self.operands.items():
            out.append(f"    operand {k}: {v}")
        if self.value:
            out.append(f"    value: {self.value}")
        return out


#: The error classes of :class:`OpError`, in the order of the report's legend.
ERROR_CLASSES = ("exact", "rounding", "diverges", "unmeasured")


@dataclass
class OpError:
    """How one instruction's device value compares with its reference value, both computed from
    the program's arguments (so an error made upstream shows in every op that carries it).

    ``kind``: ``"exact"`` (the same values; NaN where the reference has NaN), ``"rounding"``
    (different, within the comparison's tolerance), ``"diverges"`` (outside it); the report
    draws ``"unmeasured"`` for an instruction without one (no array value, or dead). The errors
    are the largest over the instruction's values, in the value's element type (ulps) or as
    numbers (``max_abs``, ``max_rel``, unitless); ``mismatches``: elements outside the
    tolerance.
    """

    kind: str
    max_abs: float
    max_rel: float
    max_ulp: float
    mismatches: int
    #: why a value that differs is right (its own error on the device's operands, within the
    #: device's precision: "dot.3: up to 1.9e-3 relative, within TPU v5e DEFAULT precision ..."), or ''
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "max_abs": self.max_abs, "max_rel": self.max_rel, "max_ulp": self.max_ulp,
                "mismatches": self.mismatches, "note": self.note}


@dataclass
class OpsBisection:
    """The result of ``bisect="ops"``.

    ``status``: ``"no divergence"`` (the outputs match: nothing to bisect), ``"localised"``
    (``culprit`` introduces it, with evidence) or ``"not localised"`` (``note`` says why; nobody is
    blamed). ``isolation``: ``"alone"`` (compiled alone on the device's operand values it still
    diverges), ``"group"`` (only compiled together with ``group``, the ops before it, an
    optimization across them; between two environments by suffix cuts, the culprit and the ops
    after it it must be compiled with) or ``"context"`` (only inside the program). ``compiles``: how many
    compiles the search took; ``method``: how it searched. ``first_divergent``: the instruction
    where the values first depart from the reference (the culprit when localised; '' when the
    search did not get that far). ``op_errors``: for a divergence, each instruction's device value
    against its reference value, both computed from the program's arguments (one more compile,
    with every value exposed: :class:`OpError` by instruction name; empty when that compile failed
    or the outputs match).
    """

    status: str
    culprit: Culprit | None = None
    isolation: str = ""
    group: list[str] = field(default_factory=list)
    compiles: int = 0
    method: str = ""
    note: str = ""
    first_divergent: str = ""
    op_errors: dict[str, OpError] = field(default_factory=dict)
    #: when the culprit is a while, if, case or call: the part of it the search went into
    #: (``"body (iteration 4)"``, iterations from 0; ``"true branch"``, ``"branch 2"``,
    #: ``"called function"``) and its bisection there, as a program of its own
    region: str = ""
    inside: OpsBisection | None = None
    #: what the part gone into was fed: the device's values (against the reference), the good run's
    #: (against a second module: both sides fed the same)
    inside_on: str = "the device's values"
    #: for an optimized per-partition dump (one partition's program of an SPMD program): the
    #: partitions in which the culprit computes another value than its rule (or than the same
    #: instruction of the per-partition module compared against); empty otherwise
    partitions: list[int] = field(default_factory=list)

    @property
    def path(self) -> str:
        """Where the divergence is, down the regions: ``while.5 > body (iteration 4) > multiply.3``."""
        parts: list[str] = []
        r: OpsBisection | None = self
        while r is not None and r.culprit is not None:
            parts.append(r.culprit.name + (f" > {r.region}" if r.inside is not None else ""))
            r = r.inside
        return " > ".join(parts)

    @property
    def deepest(self) -> OpsBisection:
        """The bisection down the regions that names the instruction itself (``self`` without regions)."""
        r = self
        while r.inside is not None and r.inside.culprit is not None:
            r = r.inside
        return r

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "culprit": None if self.culprit is None else self.culprit.as_dict(),
                "isolation": self.isolation, "group": self.group, "compiles": self.compiles, "method": self.method,
                "note": self.note, "first_divergent": self.first_divergent, "path": self.path, "region": self.region,
                "inside": None if self.inside is None else self.inside.as_dict(), "inside_on": self.inside_on,
                "partitions": self.partitions,
                "where": _where(self.deepest.culprit),
                "op_errors": {k: v.as_dict() for k, v in self.op_errors.items()}}

    def __str__(self) -> str:
        head = f"bisect ops: {self.status}" + (f" ({self.compiles} compiles; {self.method})" if self.compiles else "")
        where = _where(self.deepest.culprit) if self.inside is not None else ""
        out = [head] + ([f"  path: {self.path}" + (f" ({where})" if where else "")] if self.inside is not None else [])
        if self.culprit is not None:
            out.append("  the first instruction that introduces the divergence:")
            out.extend(self.culprit.lines())
        if self.note:
            out.extend(f"  {line}" for line in self.note.splitlines())  # a note of several lines: each indented
        if self.inside is not None and self.culprit is not None:
            out.append(f"  inside {self.culprit.name}, its {self.region}, on {self.inside_on} there:")
            out.extend("  " + x for x in str(self.inside).splitlines()[1:])
        notes = [e.note for e in self.op_errors.values() if e.note and e.kind != "diverges"]
        if notes:
            out.append("  precision-limited ops, each within its device's bound on the device's operands:")
            out.extend(f"    {n}" for n in notes[:12])
            out.extend([f"    ... and {len(notes) - 12} more"] if len(notes) > 12 else [])
        return "\n".join(out)


def _where(c: Culprit | None) -> str:
    """The HLO name an instruction of a region's program came from and its source line, as a path's
    last step is read: ``sub.3, at model.py:12`` ('' when neither is known)."""
    if c is None:
        return ""
    parts = ([c.op_name] if c.op_name and c.op_name != c.name else []) + ([f"at {c.source}"] if c.source else [])
    return ", ".join(parts)


# -- the program's values ------------------------------------------------------------------------------------------
class _Program:
    """The instruction graph of a computation, its values (slots: one per array result of each
    instruction), who reads what, and the reference value of every slot. Its cuts run on the
    settings' device, compiled with ``options`` (the comparison's), and are judged by the
    settings' tolerances and device kind.

    Raises CompareArgumentError for settings of recorded outputs: nothing runs on a device."""

    def __init__(self, comp: XlaComputation, args: Sequence[Any], settings: CompareSettings,
                 options: CompileOptions | None = None, need_reference: bool = True) -> None:
        from ._walk import dtype_of

        self.device = settings.device_to_run()
        self.comp = comp
        self.graph = comp.instruction_graph()
        self.instrs: list[Instruction] = comp.instructions()
        self.args = [np.asarray(a).astype(dtype_of(p.shape), copy=False) for a, p in zip(args, self.graph.params,
                                                                                      strict=True)]
        self.settings = settings
        self.options = options
        self.compiles = 0
        self.nparams = sum(1 for i in self.instrs if i.opcode == "parameter")
        # slots: (instruction index, node) for each array value of each instruction
        self.slots: dict[int, list[XlaOp]] = {}
        for ins in self.instrs:
            parts = self.graph.parts.get(ins.op.id)
            nodes = list(parts) if parts is not None else [ins.op]
            self.slots[ins.index] = [n for n in nodes if n.shape.is_array()]
        last = {ins.index: ins.index for ins in self.instrs}
        self.reads: dict[int, set[int]] = {}
        for ins in self.instrs:
            srcs = set()
            for x in self._inputs(ins.op):
                try:
                    srcs.add(self.graph.instruction_of(x).index)
                except XlaSdkError:
                    continue
            self.reads[ins.index] = srcs
            for s in srcs:
                last[s] = max(last[s], ins.index)
        end = len(self.instrs)
        for o in [*self.graph.outputs, *self.graph.effects]:
            try:
                last[self.graph.instruction_of(o).index] = end
            except XlaSdkError:
                continue
        self.last_use = last
        # only what the outputs and side effects need: dead instructions are neither run nor blamed
        live = closure([i for i, u in last.items() if u == end], lambda k: self.reads.get(k, ()))
        for ins in self.instrs:
            if ins.index not in live:
                self.slots[ins.index] = []
        self.ref: dict[int, Any] = {}
        self.bounds: dict[int, Any] = {}  # per reference value: the rounding error it may carry
        if need_reference:
            self._reference()

    def _inputs(self, op: XlaOp) -> list[XlaOp]:
        """The outer values ``op`` reads: its operands, and what its regions (at any depth) capture or bind."""
        out = list(op.operands)
        stack = list(op.regions)
        while stack:
            r = stack.pop()
            out.extend(r.captures)
            out.extend(r.bindings or ())
            for o in [*r.results, *r.effects]:
                stack.extend(o.regions)
        return out

    def main_inputs(self, op: XlaOp) -> list[XlaOp]:
        """The values of ``main`` that ``op`` reads (operands, region captures), each once."""
        out: dict[int, XlaOp] = {}
        for x in self._inputs(op):
            if x in self.graph.names or (x.opdef is GET_TUPLE_ELEMENT and x.operands[0] in self.graph.names):
                out.setdefault(id(x), x)
        return list(out.values())

    def _reference(self) -> None:
        from ._bounds import error_bounds
        from ._walk import Evaluator

        env: dict[int, Any] = {id(p): a for p, a in zip(self.graph.params, self.args, strict=True)}
        roots = [n for i in self.instrs for n in self.slots[i.index]] + [*self.graph.outputs, *self.graph.effects]
        ev = Evaluator(self.comp)
        ev.model, ev.precision = self.settings.kind, self.settings.precision
        ev.run_graph(roots, env)
        self.ref = env
        self.bounds = error_bounds(roots, env, ev)

    # -- running parts of it on the device
    def run(self, nodes: Sequence[XlaOp]) -> list[np.ndarray[Any, Any]]:
        """The device's values of ``nodes``, from one compile of the program with them as outputs.

        Raises :class:`_CutFailed` when that program does not compile or run."""
        from ..runtime import compile as _compile

        self.compiles += 1
        try:
            sub = self.comp.with_outputs(list(nodes))
            out = _compile(sub, self.device, options=self.options)(*self.args)
        except Exception as e:  # noqa: BLE001 - reported as what stopped the search, never as a culprit
            raise _CutFailed(f"{type(e).__name__}: {' '.join(str(e).split())[:300]}") from e
        return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]

    def check(self, node: XlaOp, got: np.ndarray[Any, Any], want: np.ndarray[Any, Any],
              env: dict[int, Any] | None = None) -> OutputComparison:
        from ._bounds import OutputScale, made_by_dot, output_scale
        from ._judge import is_exact, own_bound
        from ._report import compare_one

        s = self.settings
        try:
            scale: float = output_scale(node, env if env is not None else self.ref)
        except KeyError:
            scale = 0.0
        if env is None:  # against the reference's own values: the rounding carried from before counts
            scale = OutputScale(scale, self.bounds.get(id(node)), made_by_dot(node))
        else:  # on the device's operand values: the op's own bound on the device's kind, exact ops exactly
            kind = s.kind
            own = own_bound(self.comp, node, env, want, kind, s.precision)
            exact = is_exact(node, kind) and own is not None
            scale = OutputScale(0.0 if exact else scale, own, node.opdef.props.bilinear, exact)
        return compare_one(0, got, np.asarray(want), s.rtol, s.atol, scale, s.ulps)

    def cut(self, k: int) -> list[XlaOp]:
        """The values live after instruction ``k`` (read by a later instruction, or an output), and
        ``k``'s own."""
        return [n for i in range(self.nparams, k + 1) if self.last_use[i] > k or i == k for n in self.slots[i]]

    def culprit(self, ins: Instruction, operand_values: dict[int, Any], value: Any,
                error: OutputComparison | None) -> Culprit:
        md = ins.metadata
        source = f"{md.source_file}:{md.source_line}" if md.source_file else ""
        operands = {}
        for x in ins.op.operands:
            owner = self.graph.instruction_of(x)
            key = owner.name if x in self.graph.names else f"{owner.name}#{x.extra}"
            if id(x) in operand_values:
                operands[key] = _summary(operand_values[id(x)])
        return Culprit(ins.name, ins.opcode, ins.index, hlo_line(self.comp, ins), source, md.op_name, error, operands,
                       "" if value is None else _summary(value))


class _CutFailed(Exception):
    """A program cut out of the one being bisected did not compile or run."""


def hlo_line(comp: XlaComputation, ins: Instruction) -> str:
    """``ins`` as one line of HLO text, named as :meth:`XlaComputation.instructions` names it and
    its operands: ``divide.4 = f32[4]{0} divide(exponential.1, broadcast_in_dim.3)``. The line is
    the instruction's own also when it has several results (a ``while``, ``call``, ``custom-call``
    or ``topk``, with a tuple shape); a tuple XLA builds of its operands (a ``while``'s state) is
    written inline: ``while.5 = (s32[], f32[4]{0}) while(tuple(constant.4, h0)), condition=...``."""
    try:
        sub = comp.extract([ins.name])
        text = sub.as_hlo_text(print_metadata=False)
        graph = sub.instruction_graph()
        pnames: list[str] = [graph.instruction_of(q).name for q in graph.params]  # by parameter number
    except Exception as e:  # noqa: BLE001 - a line of the report, never a failure of the bisection
        return f"(no HLO text: {type(e).__name__}: {str(e)[:120]})"
    raw = [ln.strip() for ln in text[text.find("ENTRY"):].splitlines()[1:] if "=" in ln]
    lines = [parts for ln in raw if (parts := _hlo_parts(ln)) is not None]
    if not lines:
        return re.sub(r"^ROOT\s+", "", raw[-1]) if raw else ""
    defs = {p.name: p for p in lines}
    # the instruction's own line: the last that is not a parameter, a tuple or a tuple's element
    main = ([p for p in lines if p.opcode not in ("parameter", "get-tuple-element", "tuple")] or lines)[-1]

    def operand(token: str, depth: int = 0) -> str:
        name = token.removeprefix("%")
        d = defs.get(name)
        if d is None:
            return token
        if d.opcode == "parameter" and d.args.isdigit() and int(d.args) < len(pnames):
            return pnames[int(d.args)]
        if d.opcode == "tuple" and depth < 8:
            return f"tuple({', '.join(operand(a, depth + 1) for a in _split_top(d.args))})"
        return name

    args = ", ".join(operand(a) for a in _split_top(main.args))
    if ins.opcode == "parameter" and main.opcode == "parameter":  # its number in comp, not in the one-op module
        args = next((str(k) for k, q in enumerate(comp.instruction_graph().params) if q is ins.op), args)
    return f"{ins.name} = {main.shape} {main.opcode}({args}){main.rest}"


@dataclass(frozen=True)
class _HloLine:
    """One instruction line of HLO text: ``name = shape opcode(args)rest``."""

    name: str
    shape: str
    opcode: str
    args: str
    rest: str


def _close(text: str, start: int) -> int:
    """The index of the ``)`` that closes the ``(`` at ``start`` of ``text`` (-1 when none does);
    parentheses inside double-quoted strings do not count."""
    depth, quoted, k = 0, False, start
    while k < len(text):
        c = text[k]
        if quoted:
            if c == "\\":
                k += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return k
        k += 1
    return -1


def _hlo_parts(line: str) -> _HloLine | None:
    """``line`` (one line of an HLO computation's body) split into its parts; a tuple shape
    (``(s32[], f32[4]{0}, /*index=5*/f32[2]{0})``) is one part. ``None`` when it is no instruction."""
    m = re.match(r"(?:ROOT\s+)?%?([^\s=]+)\s*=\s*", line)
    if m is None:
        return None
    k = m.end()
    if line.startswith("(", k):
        end = _close(line, k)
        if end < 0:
            return None
        shape, k = line[k:end + 1], end + 1
    else:
        s = re.match(r"\S+", line[k:])
        if s is None:
            return None
        shape, k = s.group(0), k + s.end()
    op = re.compile(r"\s+([a-z][\w-]*)\(").match(line, k)
    if op is None:
        return None
    end = _close(line, op.end() - 1)
    if end < 0:
        return None
    return _HloLine(m.group(1), shape, op.group(1), line[op.end():end].strip(), line[end + 1:])


def _split_top(args: str) -> list[str]:
    """``args`` split at its top-level commas (not those inside brackets, braces or parentheses), stripped,
    without XLA's ``/*index=5*/`` marks."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in re.sub(r"/\*.*?\*/", "", args):  # XLA's /*index=5*/ marks
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    last = "".join(cur).strip()
    return [*out, last] if last or out else out


def _diverges(p: _Program, nodes: Sequence[XlaOp], got: Sequence[np.ndarray[Any, Any]]) -> int | None:
    """The position of the first of ``nodes`` whose device value ``got`` departs from the reference."""
    for j, (n, g) in enumerate(zip(nodes, got, strict=True)):
        if not p.check(n, g, p.ref[id(n)]).ok:
            return j
    return None


# -- ops ---------------------------------------------------------------------------------------------------------
def local_divergences(comp: XlaComputation, args: Sequence[Any], *, device: DeviceLike = None,
                      options: CompileOptions | None = None, rtol: float | None = None, atol: float | None = None,
                      ulps: float | None = None, device_kind: str | None = None, precision: str | None = None,
                      settings: CompareSettings | None = None) -> list[tuple[str, OutputComparison]]:
    """Every instruction whose device value differs from its reference rule applied to the
    device's values of its operands (the test :func:`bisect_ops` blames an instruction by), from one
    compile with every value exposed: ``(name, comparison)`` pairs in topological order (empty on a
    program XLA computes right). Exposing every value changes what XLA fuses, so a divergence that
    needs fusion may not show here; :func:`bisect_ops` does not rely on it. ``settings``: the
    keywords but ``options`` as one :class:`~xlasdk.CompareSettings` (``options`` left out: its
    ``xla_flags``), as :func:`bisect_ops` takes it.
    """
    from ._walk import Evaluator

    refuse_both("local_divergences", settings, device=device, rtol=rtol, atol=atol, ulps=ulps,
                device_kind=device_kind, precision=precision)
    s = settings if settings is not None else CompareSettings(
        device=device, rtol=rtol, atol=atol, ulps=ulps, precision=precision,
        device_kind=device_kind)  # left out: the device's kind, as compare judges it
    if settings is not None and options is None:
        options = settings.flag_options()
    p = _Program(comp, args, s, options, need_reference=False)
    nodes = [n for i in p.instrs[p.nparams:] for n in p.slots[i.index]]
    dev = {id(q): a for q, a in zip(p.graph.params, p.args, strict=True)}
    if nodes:
        dev.update({id(n): g for n, g in zip(nodes, p.run(nodes), strict=True)})
    out = []
    for ins in p.instrs[p.nparams:]:
        inputs = [x for x in p.main_inputs(ins.op) if x.shape.is_array()]
        if not p.slots[ins.index] or any(id(x) not in dev for x in inputs):
            continue
        env = {id(x): dev[id(x)] for x in inputs}
        Evaluator(comp).run_graph(p.slots[ins.index], env)
        for n in p.slots[ins.index]:
            c = p.check(n, dev[id(n)], env[id(n)], env)
            if not c.ok:
                out.append((ins.name, c))
    return out


def _op_errors(p: _Program) -> dict[str, OpError]:
    """Each instruction's device value (one compile, every value exposed) against its reference
    value; empty when that compile fails."""
    from ._judge import why_within
    from ._walk import widened

    nodes = [n for i in p.instrs[p.nparams:] for n in p.slots[i.index]]
    try:
        dev = dict(zip([id(n) for n in nodes], p.run(nodes) if nodes else [], strict=True))
    except _CutFailed:
        return {}
    dev.update({id(q): a for q, a in zip(p.graph.params, p.args, strict=True)})
    out: dict[str, OpError] = {}
    for ins in p.instrs:
        slots = [n for n in p.slots[ins.index] if id(n) in dev and id(n) in p.ref]
        if not slots:
            continue
        kinds, worst = [], [0.0, 0.0, 0.0, 0]
        for n in slots:
            got, want = np.asarray(dev[id(n)]), np.asarray(p.ref[id(n)])
            c = p.check(n, got, want)
            g, w = widened(got), widened(want)
            exact = g.shape == w.shape and bool(np.array_equal(g, w, equal_nan=g.dtype.kind in "fc"))
            kinds.append("diverges" if not c.ok else "exact" if exact else "rounding")
            worst = [max(worst[0], c.max_abs), max(worst[1], c.max_rel), max(worst[2], c.max_ulp),
                     worst[3] + c.mismatches]
        kind = next(k for k in ("diverges", "rounding", "exact") if k in kinds)
        note = ""
        if kind == "rounding" and len(slots) == 1:
            note = why_within(p.comp, ins.name, slots[0], dev, dev[id(slots[0])], p.settings.kind,
                              p.settings.precision)
        out[ins.name] = OpError(kind, float(worst[0]), float(worst[1]), float(worst[2]), int(worst[3]), note)
    return out


_OPS_METHOD = "binary search over the topological order, the program cut after a candidate"


def _bisect_ops(p: _Program, diverged: bool | None, say: Callable[[str], None], depth: int = 0,
                descend: Descend | None = None) -> OpsBisection:
    comp = p.comp
    outs = [n for o in p.graph.outputs for n in ([o] if o.shape.is_array() else [])]
    if not outs:
        return OpsBisection("no divergence", note="the program has no array output")
    n_ins = len(p.instrs)
    method = _OPS_METHOD
    if diverged is None:
        diverged = _diverges(p, outs, p.run(outs)) is not None
    if not diverged:
        return OpsBisection("no divergence", compiles=p.compiles)
    lo, hi = p.nparams - 1, n_ins - 1
    values: dict[int, dict[int, Any]] = {lo: {}}
    top = p.cut(hi)
    got = p.run(top)
    if _diverges(p, top, got) is None:
        return OpsBisection("not localised", compiles=p.compiles, method=method,
                            note="the outputs match the reference when the program is recompiled with them as "
                                 "with_outputs gives them (XLA compiles it differently); bisect=\"passes\" "
                                 "(--bisect passes) may help")
    values[hi] = {id(n): g for n, g in zip(top, got, strict=True)}
    while hi - lo > 1:
        mid = (lo + hi) // 2
        nodes = p.cut(mid)
        say(f"bisect ops: instructions {lo + 1}..{hi} of {n_ins}, trying the cut after {p.instrs[mid].name}")
        got = p.run(nodes)
        vals = {id(n): g for n, g in zip(nodes, got, strict=True)}
        if _diverges(p, nodes, got) is not None:
            hi, values[hi] = mid, vals
        else:
            lo, values[lo] = mid, vals
    ins = p.instrs[hi]
    before, after = values[lo], values[hi]
    before.update({id(pp): a for pp, a in zip(p.graph.params, p.args, strict=True)})
    op_inputs = [x for x in p.main_inputs(ins.op) if x.shape.is_array()]
    missing = [x for x in op_inputs if id(x) not in before]
    maybe = [after.get(id(n)) for n in p.slots[ins.index]]
    dev_value: list[np.ndarray[Any, Any]] = [v for v in maybe if v is not None]
    if missing or len(dev_value) != len(maybe) or not dev_value:
        return OpsBisection("not localised", compiles=p.compiles, method=method, first_divergent=ins.name,
                            note=f"the divergence appears at {ins.name} ({ins.opcode}), but its operands' device "
                                 "values could not be read")
    # the evidence: its rule on the device's operand values against its device value
    from ._walk import Evaluator

    env = {id(x): before[id(x)] for x in op_inputs}
    ev = Evaluator(comp)
    ev.run_graph(p.slots[ins.index], env)
    errors = [p.check(n, v, env[id(n)], {**p.ref, **env}) for n, v in zip(p.slots[ins.index], dev_value, strict=True)]
    bad = [e for e in errors if not e.ok]
    value = dev_value[0] if len(dev_value) == 1 else None
    operand_values = {id(x): env[id(x)] for x in ins.op.operands if id(x) in env}
    if not bad:
        say(f"bisect ops: the values depart from the reference at {ins.name}, which is right on the device's "
            "operands; looking for the group of ops whose compile diverges")
        isolation, group, _ = _isolate(p, ins, env)
        why = (f"compiled together, {', '.join(group)} diverge (exposing their intermediate values removes it: XLA "
               "optimizes across them, or XLA:CPU flushes a subnormal value to zero); bisect=\"passes\" "
               "(--bisect passes) names the XLA passes involved" if isolation == "group" else
               "their rounding errors, within tolerance, are amplified, or XLA compiles the preceding ops "
               "differently in this cut")
        return OpsBisection(
            "not localised", None, isolation if isolation == "group" else "", group if isolation == "group" else [],
            p.compiles, method,
            note=f"the values first depart from the reference at {ins.name} ({ins.opcode}), but it computes what "
                 f"its rule gives on the device's operand values ({why}); no instruction is blamed",
            first_divergent=ins.name)
    culprit = p.culprit(ins, operand_values, value, bad[0])
    # alone, on the device's operand values
    say(f"bisect ops: {ins.name} diverges on the device's operand values; compiling it alone")
    isolation, group, note = _isolate(p, ins, env)
    found = OpsBisection("localised", culprit, isolation, group, p.compiles, method, note, first_divergent=ins.name)
    if descend is not None:  # inside a while, a branch or a call (reference/_bisect_regions.py)
        found = descend(p, ins, env, found, say, depth)
    found.compiles = p.compiles
    return found


def _extract_inputs(p: _Program, chosen: Sequence[Instruction]) -> list[XlaOp]:
    """The parameters :meth:`XlaComputation.extract` gives ``chosen``, in order (the values they read
    from outside the set)."""
    inside = {id(c.op) for c in chosen}
    inputs: dict[int, XlaOp] = {}
    for c in sorted(chosen, key=lambda i: i.op.id):
        if c.opcode == "parameter":
            inputs.setdefault(id(c.op), c.op)
            continue
        for x in [*c.op.operands, *(cap for r in c.op.regions for cap in r.captures)]:
            src = x.operands[0] if x.opdef is GET_TUPLE_ELEMENT and x not in p.graph.names else x
            if id(src) not in inside and id(x) not in inside:
                inputs.setdefault(id(x), x)
    return list(inputs.values())


def _isolate(p: _Program, ins: Instruction, env: dict[int, Any]) -> tuple[str, list[str], str]:
    """Compile ``ins`` alone on the device's operand values, then with growing groups of its
    ancestors before it; which reproduces the divergence."""
    from ._orders import verdict
    from ._runners import ReferenceEvaluator, run_against

    # each group against the reference at the settings' tolerances, judged by the device's own model, XLA
    # compiling it without excess precision when the search's compiles had options (compare's), with it else
    s = replace(p.settings, excess_precision=p.options is None, xla_flags={}, device_kind=None, precision=None,
                progress=None)
    runner = ReferenceEvaluator(s.excess_precision)

    def diverges(group: list[Instruction], values: dict[int, Any]) -> bool | None:
        try:
            sub = p.comp.extract([g.name for g in group])
            feed = [values[id(x)] for x in _extract_inputs(p, group)]
            p.compiles += 1
            r = run_against(sub, feed, s, runner).report
        except Exception:  # noqa: BLE001 - a group that cannot be cut out proves nothing either way
            return None
        v = verdict(r)
        return None if v == "CANNOT JUDGE" else v == "DIVERGENCE"  # a group too loose to judge proves nothing

    alone = diverges([ins], env)
    if alone:
        return "alone", [], (f"{ins.name} compiled alone on the device's operand values gives the same wrong value")
    ancestors = _ancestors(p, ins.index)
    size, found = 2, None
    tried = 1
    while found is None and size <= ins.index - p.nparams + 1 and tried < 12:
        group = [p.instrs[i] for i in sorted(ancestors) if i > ins.index - size or i == ins.index]
        group = [g for g in group if g.opcode != "parameter"]
        tried += 1
        if len(group) > 1 and diverges(group, p.ref):
            found = group
            break
        size *= 2
    pointer = "; bisect=\"passes\" (--bisect passes) names the XLA passes involved"
    if found is not None:
        # shrink from the front: the latest start whose group still diverges
        lo_i = 0
        while lo_i + 2 < len(found) and diverges(found[lo_i + 1:], p.ref):  # ins alone was tried above
            lo_i += 1
        found = found[lo_i:]
        names = [g.name for g in found]
        return "group", names, (f"{ins.name} alone computes the right value; it diverges when compiled with "
                                f"{', '.join(names[:-1])} (XLA optimizes across them, e.g. an algebraic "
                                f"simplification, or XLA:CPU flushes a subnormal input to zero){pointer}")
    why = "could not be compiled alone" if alone is None else "computes the right value when compiled alone"
    return "context", [], (f"{ins.name} {why}, and no group of the ops before it reproduces the divergence: it "
                           f"diverges only inside this program's compile{pointer}")


def _ancestors(p: _Program, k: int) -> set[int]:
    """Instruction ``k`` and every instruction it reads, directly or not (by index)."""
    return closure([k], lambda i: p.reads.get(i, ()))
