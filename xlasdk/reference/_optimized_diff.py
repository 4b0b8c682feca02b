"""The optimized HLO of one module under two environments (two jaxlib / libtpu releases), compared
instruction by instruction (:func:`xlasdk.reference._other_env.compare_optimized_hlo`,
``xlasdk compare FILE --optimized-hlo --against-python PATH [--topology v5e:1x1]``).

Both sides compile the same module (for a TPU topology without a chip, or for the CPU) and print the
HLO XLA made. Each text is read line by line (:func:`parse_optimized`, on the reducer's
:class:`~xlasdk._reduce_text.HloLines`: no XLA parser, so a printer's
new attribute cannot stop it): every instruction of every computation with its opcode, shape (element
type and dimensions), layout (tiles and memory space included), fusion kind, custom-call target and
the ``op_name`` of its metadata (the JAX op it came from). The parameters of fused computations are
left out (their operand's shape and layout are shown where it is made).

Instructions are matched (:func:`diff_optimized`) first by origin (``op_name``, then the source
location: in order, the same opcode first), then by opcode and shape, then by opcode; a pair that
differs in opcode, shape, layout, fusion kind or target is *changed*; what is left is only on one
side. The report names each instruction with the computation it sits in.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .._where import where
from ..errors import XlaSdkError

__all__ = ["OptInstruction", "OptimizedDiff", "Change", "parse_optimized", "diff_optimized"]

_ARRAY: Final = re.compile(r"^([a-z][a-z0-9]*\[[^\]]*\])(\{.*\})?$")
_KIND: Final = re.compile(r"\bkind=(k\w+)")
_CALLS: Final = re.compile(r"\bcalls=%?([\w.-]+)")
_TARGET: Final = re.compile(r"\bcustom_call_target=\"([^\"]*)\"")
_OP_NAME: Final = re.compile(r"\bop_name=\"((?:[^\"\\]|\\.)*)\"")
_SOURCE: Final = re.compile(r"\bsource_file=\"((?:[^\"\\]|\\.)*)\" source_line=(\d+)(?:.*?source_column=(\d+))?")


@dataclass(frozen=True)
class OptInstruction:
    """One instruction of an optimized module: its ``name`` in ``computation`` (``fused``: a fusion's
    body), ``opcode``, ``shape`` (element types and dimensions), ``layout`` (as printed, tiles and
    memory spaces included; ``""`` when none), ``fusion_kind`` (``kLoop``...), ``target`` (a custom
    call's) and ``op_name`` (its metadata's; ``""`` when none)."""

    computation: str
    fused: bool
    name: str
    opcode: str
    shape: str
    layout: str
    fusion_kind: str = ""
    target: str = ""
    op_name: str = ""
    source: str = ""

    @property
    def origin(self) -> str:
        """Where it came from in the user's program: ``op_name @ file:line:column`` (either part alone
        where XLA kept one; ``""`` when neither)."""
        return " @ ".join(p for p in (self.op_name, self.source) if p)

    def describe(self) -> str:
        """``opcode shape{layout}`` with the fusion kind, target and op_name where there are."""
        text = f"{self.opcode} {self.shape}{self.layout}"
        if self.fusion_kind:
            text += f" kind={self.fusion_kind}"
        if self.target:
            text += f" target={self.target}"
        return text

    def where(self) -> str:
        return f"%{self.name} in {'fusion body ' if self.fused else ''}{self.computation}"

    def as_dict(self) -> dict[str, Any]:
        return {"computation": self.computation, "fused": self.fused, "name": self.name, "opcode": self.opcode,
                "shape": self.shape, "layout": self.layout, "fusion_kind": self.fusion_kind, "target": self.target,
                "op_name": self.op_name, "source": self.source}


def _split_shape(shape: str) -> tuple[str, str]:
    """``f32[8,64]{1,0:T(8,128)}`` -> (``f32[8,64]``, ``{1,0:T(8,128)}``); a tuple's elements each."""
    shape = shape.strip()
    if shape.startswith("("):
        parts, layouts, depth, start = [], [], 0, 1
        inner = shape[1:-1]
        pieces: list[str] = []
        for k, c in enumerate(inner):
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif c == "," and depth == 0:
                pieces.append(inner[start - 1:k])
                start = k + 2
        pieces.append(inner[start - 1:])
        for p in pieces:
            s, layout = _split_shape(p)
            parts.append(s)
            layouts.append(layout)
        return f"({', '.join(parts)})", (f"({', '.join(layouts)})" if any(layouts) else "")
    m = _ARRAY.match(shape)
    if m is None:
        return shape, ""
    return m.group(1), m.group(2) or ""


def parse_optimized(text: str, what: str = "the optimized HLO") -> list[OptInstruction]:
    """The instructions of an optimized module's HLO text (fused computations' parameters left out).

    Raises
    ------
    XlaSdkError
        A text with no computation or an instruction line that cannot be read (``what`` names it).
    """
    from .._reduce_text import HloLines

    h = HloLines(text)
    if h.unread:
        k = h.unread[0]
        raise XlaSdkError(f"{what}: line {k + 1} is no instruction xlasdk can read: "
                          f"{h.lines[k].strip()[:200]!r}{where()}")
    if not any(c.instrs for c in h.comps):
        raise XlaSdkError(f"{what}: no instruction found: expected XLA's HLO text (HloModule ..., computations "
                          f"of 'name = shape opcode(operands)' lines){where()}")
    fused_bodies = {calls.group(1) for c in h.comps for i in c.instrs
                    if i.opcode == "fusion" and (calls := _CALLS.search(i.attrs)) is not None}
    out = []
    for c in h.comps:
        fused = c.name in fused_bodies
        for i in c.instrs:
            if fused and i.opcode == "parameter":
                continue
            kind, target = _KIND.search(i.attrs), _TARGET.search(i.attrs)
            op_name, source = _OP_NAME.search(i.attrs), _SOURCE.search(i.attrs)
            place = "" if source is None else (
                f"{source.group(1)}:{source.group(2)}" + (f":{source.group(3)}" if source.group(3) else ""))
            plain, layout = _split_shape(i.shape)
            out.append(OptInstruction(c.name, fused, i.name, i.opcode, plain, layout, kind.group(1) if kind else "",
                                      target.group(1) if target else "", op_name.group(1) if op_name else "",
                                      place))
    return out


@dataclass(frozen=True)
class Change:
    """A matched pair that differs: ``here`` and ``there`` and what differs (``opcode``, ``shape``,
    ``layout``, ``fusion kind``, ``target``)."""

    here: OptInstruction
    there: OptInstruction
    what: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"here": self.here.as_dict(), "there": self.there.as_dict(), "what": list(self.what)}


@dataclass
class OptimizedDiff:
    """The optimized HLO of two environments compared: ``changed`` pairs, instructions ``only_here``
    and ``only_there``, ``matched`` the number of pairs (changed or not); ``here`` / ``there`` name the
    sides (their releases), ``target`` what was compiled for (``v5e:1x1``, ``cpu``)."""

    here: str
    there: str
    target: str
    count_here: int
    count_there: int
    matched: int
    by_origin: int
    changed: list[Change] = field(default_factory=list)
    only_here: list[OptInstruction] = field(default_factory=list)
    only_there: list[OptInstruction] = field(default_factory=list)

    @property
    def same(self) -> bool:
        """No instruction added, removed or changed."""
        return not (self.changed or self.only_here or self.only_there)

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "here": self.here, "there": self.there, "instructions_here": self.count_here,
                "instructions_there": self.count_there, "matched": self.matched, "matched_by_origin": self.by_origin,
                "same": self.same, "changed": [c.as_dict() for c in self.changed],
                "only_here": [i.as_dict() for i in self.only_here],
                "only_there": [i.as_dict() for i in self.only_there]}

    def text(self, limit: int = 60) -> str:
        """A readable diff: a summary, then the changed pairs (``there -> here``), the instructions only
        here (``+``) and only there (``-``), at most ``limit`` lines each (the rest counted)."""
        lines = [f"optimized HLO for {self.target}: here {self.here}; there {self.there}",
                 f"  {self.count_here} instructions here, {self.count_there} there; {self.matched} matched "
                 f"({self.by_origin} by origin, {self.matched - self.by_origin} by structure): "
                 f"{len(self.changed)} changed, {len(self.only_here)} only here, {len(self.only_there)} only there"]
        if self.same:
            lines.append("  the same instructions, opcodes, shapes, layouts and fusion kinds on both sides")
            return "\n".join(lines)

        def block(title: str, items: Sequence[str]) -> None:
            if not items:
                return
            lines.append(f"{title}:")
            lines.extend(f"  {s}" for s in items[:limit])
            if len(items) > limit:
                lines.append(f"  ... and {len(items) - limit} more (--json has them all)")

        def origin(i: OptInstruction) -> str:
            return f" [{i.origin}]" if i.origin else ""

        block("changed (there -> here)", [
            f"{c.there.where()} -> {c.here.where()}{origin(c.here) or origin(c.there)}: " + "; ".join(
                f"{w} {_field(c.there, w)} -> {_field(c.here, w)}" for w in c.what) for c in self.changed])
        block("only here (+)", [f"+ {i.where()}: {i.describe()}{origin(i)}" for i in self.only_here])
        block("only there (-)", [f"- {i.where()}: {i.describe()}{origin(i)}" for i in self.only_there])
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def _field(i: OptInstruction, what: str) -> str:
    value = {"opcode": i.opcode, "shape": i.shape, "layout": i.layout, "fusion kind": i.fusion_kind,
             "target": i.target}[what]
    return value or "-"


def _differences(a: OptInstruction, b: OptInstruction) -> tuple[str, ...]:
    out = []
    for what in ("opcode", "shape", "layout", "fusion kind", "target"):
        if _field(a, what) != _field(b, what):
            out.append(what)
    return tuple(out)


def _pairs(here: list[int], there: list[int], key_here: Sequence[Any], key_there: Sequence[Any]
           ) -> Iterator[tuple[int, int]]:
    """Pairs of indices with equal keys, in order within each key."""
    waiting: dict[Any, list[int]] = defaultdict(list)
    for j in there:
        waiting[key_there[j]].append(j)
    for i in here:
        q = waiting.get(key_here[i])
        if q:
            yield i, q.pop(0)


def diff_optimized(here: Sequence[OptInstruction], there: Sequence[OptInstruction], *, here_name: str = "here",
                   there_name: str = "there", target: str = "") -> OptimizedDiff:
    """Match ``here``'s instructions with ``there``'s (by op_name: of the same opcode, shape and name,
    then of the same opcode and shape, then of the same opcode, then any; by source location; then
    by opcode and shape; then by opcode) and report what differs."""
    left = set(range(len(here)))
    right = set(range(len(there)))
    pairs: list[tuple[int, int]] = []
    by_origin = 0
    keys: tuple[Callable[[OptInstruction], tuple[Any, ...] | None], ...] = (
        # many instructions share an op_name (``jvp()/mul``): the one of the same name and shape first,
        # then of the same shape, in order, before any of the op_name's
        (lambda i: (i.op_name, i.fused, i.opcode, i.shape, i.name) if i.op_name else None),
        (lambda i: (i.op_name, i.fused, i.opcode, i.shape) if i.op_name else None),
        (lambda i: (i.op_name, i.fused, i.opcode) if i.op_name else None),
        (lambda i: (i.op_name, i.fused) if i.op_name else None),
        (lambda i: (i.source, i.fused, i.opcode) if i.source else None),
        (lambda i: (i.source, i.fused) if i.source else None),
        (lambda i: (i.fused, i.opcode, i.shape, i.fusion_kind, i.target)),
        (lambda i: (i.fused, i.opcode, i.shape)),
        (lambda i: (i.fused, i.opcode)),
    )
    for step, key in enumerate(keys):
        kh = [key(i) for i in here]
        kt = [key(i) for i in there]
        found = [(a, b) for a, b in _pairs(sorted(left), sorted(right), kh, kt) if kh[a] is not None]
        for a, b in found:
            left.discard(a)
            right.discard(b)
        pairs += found
        if step < 6:
            by_origin += len(found)
    changed = []
    for a, b in sorted(pairs):
        what = _differences(here[a], there[b])
        if what:
            changed.append(Change(here[a], there[b], what))
    return OptimizedDiff(here_name, there_name, target, len(here), len(there), len(pairs), by_origin, changed,
                         [here[i] for i in sorted(left)], [there[j] for j in sorted(right)])


def optimized_hlo_here(computation: Any, topology: str | None, overrides: dict[str, Any] | None = None) -> str:
    """The optimized HLO XLA makes of ``computation`` in this environment: for one device of the TPU
    ``topology`` (no chip needed: libtpu's compile-only client; the compile runs in xlasdk's worker
    first, so an abort of XLA is an error here), or for the CPU when ``topology`` is None; a global
    SPMD module for the partitions and replicas it asks for."""
    from ..runtime import CompileOptions
    from ..runtime import client as _client
    from ..runtime import compile as _compile
    from ..runtime.per_partition import per_partition_count

    p = computation.partitioning()  # a global SPMD module: compiled for its partitions, as XLA runs it
    r, n = (p.num_replicas or 1, p.num_partitions or 1) if per_partition_count(computation) is None else (1, 1)
    options = CompileOptions(num_replicas=r, num_partitions=n, env_option_overrides=dict(overrides or {}))
    if topology is None:
        device: Any = _client("cpu", num_devices=r * n).devices()[0] if r * n > 1 else "cpu:0"
    else:
        from ..runtime.topology import topology as _topology

        device = _topology(topology).devices[0]
    text: str = _compile(computation, device, options=options).hlo_text()
    return text
