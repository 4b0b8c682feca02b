"""The reducer's text-level pass (:func:`xlasdk.reduce` on a module XLA's *loader* dies on): a module
that aborts XLA while it is parsed or imported never becomes an :class:`~xlasdk.XlaComputation`, so
it is shrunk as text, each candidate loaded in xlasdk's worker process as a file is.

HLO text is edited with its structure in mind (C-Reduce's passes, on HLO's lines):

- the module header's attributes, the stack-frame tables and every ``metadata={...}`` go at once;
- a computation (of ``ENTRY`` and any other) gets a new ``ROOT``: one of its instructions, the
  earliest first, its header's result type rewritten (what the old root read becomes dead);
- dead instructions (no reader, not the root) are deleted, by delta debugging over them;
- computations nothing calls are deleted;
- an ``ENTRY`` instruction becomes a parameter of its type; unused ``ENTRY`` parameters go (the
  others renumbered);
- then one attribute of one instruction at a time (``key=value``).

MLIR text (and HLO text once those passes are done) is cut line by line, by delta debugging over
its lines, and its locations (``loc(...)``) are dropped.

A candidate is kept when loading it still kills the worker with the same fatal line (XLA's
``file:line] Check failed: ...`` up to its first detail, or the signal), or, for a ``script``
condition, when the script still exits 0 on it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ._jaxlib import isolated

__all__ = ["HloLines", "TextReducer", "count_instructions", "crash_signature", "is_hlo_text"]

_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\((.*)\)\s*->\s*(.*?)\s*\{\s*$")
_INSTR = re.compile(r"^(\s*)(ROOT\s+)?%?([\w.\-]+)\s*=\s*(\S.*)$")
_REF = re.compile(r"%([\w.\-]+)")
_OPCODE = re.compile(r"\s*([a-z][\w\-]*)\(")
_MLIR_OP = re.compile(r"^\s*(%[\w#:, ]+=\s*)?\"?[a-z_]+\.[\w.]+")


def is_hlo_text(text: str) -> bool:
    """Whether ``text`` is HLO text (it starts with ``HloModule``), else it is taken as MLIR text."""
    return text.lstrip().startswith("HloModule")


def count_instructions(text: str) -> int:
    """Instructions of HLO text (parameters counted), or operations of MLIR text (lines that hold one)."""
    if is_hlo_text(text):
        return sum(1 for ln in text.splitlines() if _INSTR.match(ln) and not _HEADER.match(ln))
    return sum(1 for ln in text.splitlines() if _MLIR_OP.match(ln) and "func.func" not in ln
               and not ln.strip().startswith("module"))


def crash_signature(reason: str) -> str:
    """What stays the same when a reduced module kills XLA the same way: the fatal line's
    ``file:line]`` and its message up to the first detail (``. Got f32[4]``...), else the signal."""
    m = re.search(r"(\S+\.\w+:\d+\]) (.*)", reason)
    if m is None:
        m2 = re.search(r"RET_CHECK failure \((\S+)\)", reason)
        if m2 is not None:
            return m2.group(0)
        return reason.split(":", 1)[0].strip()
    msg = re.split(r"\. | Got | \(|: [^ ]*\[", m.group(2), maxsplit=1)[0]
    return f"{m.group(1)} {msg.strip()}"


def _balanced(s: str, i: int) -> int:
    """The index just past the bracket group that opens at ``s[i]`` (``(``, ``{``, ``[``), quotes respected."""
    close = {"(": ")", "{": "}", "[": "]"}
    stack: list[str] = []
    k = i
    while k < len(s):
        c = s[k]
        if c == '"':
            k += 1
            while k < len(s) and s[k] != '"':
                k += 2 if s[k] == "\\" else 1
        elif c in close:
            stack.append(close[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return k + 1
        k += 1
    return len(s)


def _split_top(s: str) -> list[str]:
    """``s`` split at the commas outside brackets and quotes."""
    parts: list[str] = []
    start = k = 0
    while k < len(s):
        c = s[k]
        if c in "({[" or c == '"':
            k = _balanced(s, k) if c != '"' else s.find('"', k + 1) + 1 or len(s)
            continue
        if c == ",":
            parts.append(s[start:k])
            start = k + 1
        k += 1
    parts.append(s[start:])
    return [p for p in parts if p.strip()]


@dataclass
class _Ins:
    line: int
    name: str
    root: bool
    shape: str
    opcode: str
    operands: str
    attrs: str  # the text after the operands' closing parenthesis (", key=value, ...")
    refs: set[str]


@dataclass
class _Comp:
    name: str
    entry: bool
    head: int
    end: int
    params: str
    result: str
    instrs: list[_Ins]


class HloLines:
    """HLO text as lines, with its computations and instructions found (what the edits need);
    ``unread``: the indices of lines in a computation that look like an instruction (``name = ...``)
    but could not be read as one (no opcode, unbalanced brackets)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.comps: list[_Comp] = []
        self.unread: list[int] = []
        cur: _Comp | None = None
        for k, ln in enumerate(self.lines):
            h = _HEADER.match(ln)
            if cur is None and h is not None:
                cur = _Comp(h.group(2), bool(h.group(1)), k, k, h.group(3), h.group(4), [])
                continue
            if cur is not None and ln.strip() == "}":
                cur.end = k
                self.comps.append(cur)
                cur = None
                continue
            if cur is not None:
                ins = _instr(k, ln)
                if ins is not None:
                    cur.instrs.append(ins)
                elif _INSTR.match(ln):
                    self.unread.append(k)

    def text(self, lines: list[str] | None = None) -> str:
        return "\n".join(self.lines if lines is None else lines) + "\n"

    def entry(self) -> _Comp | None:
        return next((c for c in self.comps if c.entry), None)

    def readers(self) -> dict[str, int]:
        """How many times each name is referenced by an instruction (operands, called computations)."""
        n: dict[str, int] = {}
        for c in self.comps:
            for i in c.instrs:
                for r in i.refs:
                    n[r] = n.get(r, 0) + 1
        return n


def _instr(k: int, ln: str) -> _Ins | None:
    m = _INSTR.match(ln)
    if m is None:
        return None
    rest = m.group(4)
    if rest.startswith("("):
        end = _balanced(rest, 0)
        if rest[end - 1] != ")":  # unbalanced
            return None
    else:
        end = rest.find(" ")
        end = len(rest) if end < 0 else end
    shape = rest[:end]
    op = _OPCODE.match(rest, end)
    if op is None:
        return None
    close = _balanced(rest, op.end() - 1)
    if rest[close - 1] != ")":  # unbalanced operands
        return None
    operands = rest[op.end(): close - 1]
    attrs = rest[close:]
    refs = set(_REF.findall(operands)) | set(_REF.findall(attrs))
    return _Ins(k, m.group(3), bool(m.group(2)), shape, op.group(1), operands, attrs, refs)


def _no_layout(shape: str) -> str:
    """A shape as a computation's header spells it: without layouts."""
    return re.sub(r"\{[^{}]*\}", "", shape)


class TextReducer:
    """Greedy passes over a module's text while any shrinks it; ``check(strategy, text)`` says
    whether a candidate still shows the problem (and counts it), ``accept(strategy, text)`` records
    a kept one."""

    def __init__(self, text: str, check: Callable[[str], bool], accept: Callable[[str, str], None]) -> None:
        self.cur = text
        self._check = check
        self._accept = accept

    def size(self, text: str) -> tuple[int, int]:
        return count_instructions(text), len(text)

    def _try(self, strategy: str, text: str | None) -> bool:
        if text is None or text == self.cur or self.size(text) >= self.size(self.cur):
            return False
        if not self._check(text):
            return False
        self.cur = text
        self._accept(strategy, text)
        return True

    # -- HLO passes -------------------------------------------------------------------------------
    def header(self) -> bool:
        """The module header's attributes, the stack-frame tables and all metadata at once, then each alone."""
        h = HloLines(self.cur)
        lines = list(h.lines)
        first = lines[0].split(",", 1)[0] if lines and lines[0].startswith("HloModule") else None
        inside = {k for c in h.comps for k in range(c.head, c.end + 1)}
        tables = [ln for k, ln in enumerate(lines) if k == 0 or k in inside]
        no_meta = [_drop_attr(ln, "metadata") for ln in lines]
        if first is not None:
            every = [first if k == 0 else ln for k, ln in enumerate([_drop_attr(x, "metadata") for x in tables])]
            if self._try("text: drop the module's attributes, metadata and stack-frame tables", h.text(every)):
                return True
            if self._try("text: drop the module's attributes", h.text([first, *lines[1:]])):
                return True
        if self._try("text: drop the stack-frame tables", h.text(tables)):
            return True
        return self._try("text: drop metadata", h.text(no_meta))

    def new_roots(self) -> bool:
        """Make an earlier instruction the ``ROOT`` of a computation (the entry first)."""
        h = HloLines(self.cur)
        for c in sorted(h.comps, key=lambda c: not c.entry):
            root = next((i for i in c.instrs if i.root), None)
            if root is None:
                continue
            for ins in c.instrs:
                if ins is root:
                    break
                lines = list(h.lines)
                lines[root.line] = lines[root.line].replace("ROOT ", "", 1)
                m = _INSTR.match(lines[ins.line])
                assert m is not None
                lines[ins.line] = f"{m.group(1)}ROOT {lines[ins.line][len(m.group(1)):]}"
                head = lines[c.head]
                arrow = head.rfind("->")
                lines[c.head] = head[:arrow] + f"-> {_no_layout(ins.shape)} {{"
                if c.entry and lines and lines[0].startswith("HloModule"):
                    lines[0] = _drop_attr(lines[0], "entry_computation_layout")
                if self._try(f"text: {ins.name} is the root of {c.name}", h.text(lines)):
                    return True
        return False

    def dead(self) -> bool:
        """Delete dead instructions (read by none, not a root, not a parameter), by delta debugging."""
        h = HloLines(self.cur)
        readers = h.readers()
        dead = [i.line for c in h.comps for i in c.instrs
                if not i.root and i.opcode != "parameter" and readers.get(i.name, 0) == 0]
        return self._ddmin_lines("text: delete dead instructions", h, dead)

    def uncalled(self) -> bool:
        """Delete the computations no instruction calls."""
        h = HloLines(self.cur)
        readers = h.readers()
        gone = [c for c in h.comps if not c.entry and readers.get(c.name, 0) == 0]
        if not gone:
            return False
        drop = {k for c in gone for k in range(c.head, c.end + 1)}
        lines = [ln for k, ln in enumerate(h.lines) if k not in drop]
        if self._try("text: delete uncalled computations", h.text(lines)):
            return True
        for c in gone:
            lines = h.lines[: c.head] + h.lines[c.end + 1:]
            if self._try(f"text: delete computation {c.name}", h.text(lines)):
                return True
        return False

    def to_parameters(self) -> bool:
        """Replace an entry instruction (the last first) by a new parameter of its type."""
        h = HloLines(self.cur)
        e = h.entry()
        if e is None:
            return False
        n = sum(1 for i in e.instrs if i.opcode == "parameter")
        for ins in reversed(e.instrs):
            if ins.opcode == "parameter" or not ins.refs - {ins.name}:
                continue
            lines = list(h.lines)
            m = _INSTR.match(lines[ins.line])
            assert m is not None
            root = "ROOT " if ins.root else ""
            lines[ins.line] = f"{m.group(1)}{root}%{ins.name} = {ins.shape} parameter({n})"
            head = lines[e.head]
            params = f"{e.params}, " if e.params.strip() else ""
            lines[e.head] = head.replace(f"({e.params})", f"({params}{ins.name}: {_no_layout(ins.shape)})", 1)
            if lines[0].startswith("HloModule"):
                lines[0] = _drop_attr(lines[0], "entry_computation_layout")
            if self._try(f"text: {ins.name} -> parameter", h.text(lines)):
                return True
        return False

    def unused_parameters(self) -> bool:
        """Delete an entry parameter nothing reads (the later ones renumbered)."""
        h = HloLines(self.cur)
        e = h.entry()
        if e is None:
            return False
        readers = h.readers()
        params = _split_top(e.params)
        for ins in e.instrs:
            if ins.opcode != "parameter" or ins.root or readers.get(ins.name, 0):
                continue
            try:
                number = int(ins.operands.strip())
            except ValueError:
                continue
            if number >= len(params):
                continue
            lines = list(h.lines)
            for other in e.instrs:
                if other.opcode == "parameter" and other is not ins:
                    try:
                        k = int(other.operands.strip())
                    except ValueError:
                        continue
                    if k > number:
                        lines[other.line] = lines[other.line].replace(f"parameter({k})", f"parameter({k - 1})", 1)
            kept = [p.strip() for j, p in enumerate(params) if j != number]
            head = lines[e.head]
            lines[e.head] = head.replace(f"({e.params})", f"({', '.join(kept)})", 1)
            if lines[0].startswith("HloModule"):
                lines[0] = _drop_attr(lines[0], "entry_computation_layout")
            del lines[ins.line]
            if self._try(f"text: delete unused parameter {ins.name}", h.text(lines)):
                return True
        return False

    def attributes(self) -> bool:
        """Delete one ``key=value`` attribute of one instruction, the last instructions first."""
        h = HloLines(self.cur)
        for c in reversed(h.comps):
            for ins in reversed(c.instrs):
                for part in _split_top(ins.attrs):
                    key = part.strip().split("=", 1)[0]
                    if not key or "=" not in part:
                        continue
                    lines = list(h.lines)
                    lines[ins.line] = lines[ins.line].replace("," + part, "", 1)
                    if self._try(f"text: drop attribute {key} of {ins.name}", h.text(lines)):
                        return True
        return False

    # -- any text ---------------------------------------------------------------------------------
    def locations(self) -> bool:
        """MLIR text: drop every ``loc(...)`` and ``#loc`` line."""
        if is_hlo_text(self.cur) or "loc(" not in self.cur:
            return False
        out = []
        for ln in self.cur.splitlines():
            if ln.startswith("#loc"):
                continue
            k = ln.find(" loc(")
            while k >= 0:
                ln = ln[:k] + ln[_balanced(ln, k + 4):]
                k = ln.find(" loc(")
            out.append(ln)
        return self._try("text: drop locations", "\n".join(out) + "\n")

    def lines(self) -> bool:
        """Delete lines, by delta debugging over every line."""
        ls = self.cur.splitlines()
        return self._ddmin_lines("text: delete lines", None, [k for k, ln in enumerate(ls) if ln.strip()])

    def _ddmin_lines(self, strategy: str, h: HloLines | None, candidates: list[int]) -> bool:
        """Delete a chunk of ``candidates`` (line indices), chunks halving from all of them to one."""
        lines = h.lines if h is not None else self.cur.splitlines()
        n = 1
        while candidates and n <= len(candidates):
            size = -(-len(candidates) // n)
            for start in range(0, len(candidates), size):
                drop = set(candidates[start: start + size])
                kept = [ln for k, ln in enumerate(lines) if k not in drop]
                if self._try(strategy, "\n".join(kept) + "\n"):
                    return True
            n *= 2
        return False

    def run(self) -> None:
        hlo = is_hlo_text(self.cur)
        passes = ((self.header, self.new_roots, self.uncalled, self.dead, self.to_parameters,
                   self.unused_parameters) if hlo else (self.locations, self.lines))
        finish = (self.attributes, self.lines) if hlo else ()
        while True:
            progressed = True
            while progressed:
                progressed = False
                for p in passes:
                    while p():
                        progressed = True
            if not any(p() for p in finish):
                return


def _drop_attr(line: str, key: str) -> str:
    """``line`` without its ``, key=value`` attribute (the value a bracket group or a word)."""
    k = line.find(f", {key}=")
    if k < 0:
        return line
    v = k + len(key) + 3
    end = _balanced(line, v) if v < len(line) and line[v] in "({[" else v + len(re.match(r"[^,]*", line[v:])[0])  # type: ignore[index]
    return line[:k] + line[end:]


# -- the checks, in the worker ------------------------------------------------------------------------
def load_hlo_text_in_worker(text: str) -> None:
    """Every step :func:`xlasdk.load_computation` takes in the worker with HLO text (runs in the worker)."""
    from .formats.untrusted import load_hlo_in_worker
    from .program._worker import module_text_in_worker

    _, bytecode, _, _, attributes, _ = load_hlo_in_worker("text", text, "candidate")
    module_text_in_worker(bytecode, attributes)


def load_mlir_text_in_worker(text: str) -> None:
    """What :func:`xlasdk.load_computation` does in the worker with MLIR text (runs in the worker)."""
    from .formats.untrusted import parse_stablehlo_in_worker

    parse_stablehlo_in_worker(text, "text", "candidate")


def loader_death(text: str, timeout: float) -> tuple[str | None, str]:
    """(the crash signature, or None when loading ``text`` does not kill the worker; what happened)."""
    target = "load_hlo_text_in_worker" if is_hlo_text(text) else "load_mlir_text_in_worker"
    try:
        isolated.request(f"xlasdk._reduce_text:{target}", text, timeout=timeout)
    except isolated.Failed as e:
        return None, f"loading failed cleanly ({e.stage}): {e.message}"
    except isolated.WorkerDied as e:
        if e.timed_out or e.killed:
            return None, f"no verdict: {e.reason}"
        return crash_signature(e.reason), f"XLA died loading it: {e.reason}"
    return None, "loads"
