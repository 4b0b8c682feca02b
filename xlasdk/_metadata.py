"""Op metadata (XLA ``OpMetadata``) in MLIR locations and in HLO module protos.

xlasdk keeps an op's metadata in its MLIR location, in the form XLA's StableHLO -> HLO converter
reads, so that every path to HLO (the direct printer, the converter, saved ``.mlir`` files)
carries it:

``loc(fused<{EXTRA}>["OP_TYPE:", "OP_NAME", "FILE":LINE:COL to END_LINE:END_COL])``

- ``"OP_TYPE:"`` (a name ending in ``:``): XLA's converter makes it ``op_type``.
- ``"OP_NAME"``: ``op_name`` (and XLA names the instruction after its last ``/`` component).
- ``"FILE":L:C to EL:EC`` (MLIR prints ``"FILE":L:C`` when the range is one point, and
  ``"FILE":L:C to :EC`` on one line): ``source_file``, ``source_line``, ``source_end_line``,
  ``source_column``, ``source_end_column`` (zeros are left out, as XLA does).
- ``EXTRA``: the fields the converter drops or mangles, under their proto names:
  ``deduplicated_name`` and ``scheduling_name`` always; ``op_type`` / ``op_name`` when they hold
  an ``@`` (XLA cuts names there) or ``op_name`` ends in ``:`` (XLA would take it for a type);
  ``source_end_line`` / ``source_end_column`` when the range is not one point (a StableHLO
  portable artifact keeps only the start of a range). The converter ignores this dictionary;
  when a module has one, :func:`mark_locations` swaps each for a marker ``op_type`` before
  conversion and :func:`patch_hlo_proto` writes the fields into the converted
  ``HloModuleProto``. Where both say something, ``EXTRA`` wins.

Fields not carried: ``stack_frame_id`` (an index into the module's stack-frame table, which only
XLA-made modules have; HLO loaded from text or a proto keeps it), ``profile_type``,
``profile_info``, ``size_of_*`` (compiler outputs) and ``preserve_layout`` (XLA's HLO text
parser does not read it).
"""

from __future__ import annotations

import re
from typing import Any

from ._mlir_attrs import mlir_str, mlir_unescape

__all__ = [
    "FIELDS",
    "INT_FIELDS",
    "Location",
    "op_location",
    "location",
    "mark_locations",
    "patch_hlo_proto",
    "without_metadata",
]

# OpMetadata fields xlasdk carries, in XLA's HLO printing order.
FIELDS = (
    "op_type",
    "op_name",
    "source_file",
    "source_line",
    "source_end_line",
    "source_column",
    "source_end_column",
    "deduplicated_name",
    "scheduling_name",
)
INT_FIELDS = frozenset({"source_line", "source_end_line", "source_column", "source_end_column"})
# Field numbers in xla_data.proto's OpMetadata.
_PROTO_NUMBER = {
    "op_type": 1,
    "op_name": 2,
    "source_file": 3,
    "source_line": 4,
    "deduplicated_name": 12,
    "scheduling_name": 16,
    "source_end_line": 17,
    "source_column": 18,
    "source_end_column": 19,
}
_EXTRA_KEYS = frozenset(
    {"op_type", "op_name", "deduplicated_name", "scheduling_name", "source_end_line", "source_end_column"}
)
_INT32_MAX = 2**31 - 1
_MARK = "__xlasdk_md_"  # marker op_type of a location whose fields are written after conversion

_STR = r'"(?:[^"\\]|\\.)*"'
_STR_RE = re.compile(_STR)
_FILE_RE = re.compile(rf"({_STR}):(\d+):(\d+)(?: to (\d*):(\d+))?")
_KEY_VALUE_RE = re.compile(rf"([A-Za-z_][A-Za-z0-9_.$]*) = ({_STR}|-?\d+)(?: : [a-z]+\d*)?")
_STR_OR_QUOTE_RE = re.compile(rf'{_STR}|"')
_SIMPLE_FUSED_RE = re.compile(rf'fused<\{{(?:{_STR}|[^"{{}}\[\]])*\}}>\[(?:{_STR}|[^"\[\]()])*\]')
_ALIAS_RE = re.compile(r"^(#loc[0-9]*) = loc\((.*)\)$", re.M)


def loc_str(s: str) -> str:
    """An MLIR string literal for a location (``\\``, ``"`` and control characters escaped)."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch < " " or ch == "\x7f":
            out.append(f"\\{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _unescape(literal: str) -> str:
    return mlir_unescape(literal[1:-1])


def _file_item(file: str, line: int, col: int, end_line: int, end_col: int) -> str:
    head = f"{loc_str(file)}:{line}:{col}"
    if (end_line, end_col) == (line, col):
        return head
    if end_line == line:
        return f"{head} to :{end_col}"
    return f"{head} to {end_line}:{end_col}"


class Location:
    """An op's location as typed values: its MLIR spelling (``text``, see the module docstring),
    the OpMetadata fields HLO gets from it (``fields``: what XLA's converter plus
    :func:`patch_hlo_proto` record, zero and empty fields left out) and the ``op_name`` the
    converter sees (``converter_name``: it names the instruction after its last ``/`` part).

    The direct HLO printer reads ``fields`` and ``converter_name``; nothing reads ``text`` back.
    """

    __slots__ = ("text", "fields", "converter_name", "_items", "_entry")

    def __init__(
        self,
        text: str,
        fields: dict[str, Any],
        converter_name: str,
        items: tuple[str, ...] = (),
        entry: dict[str, Any] | None = None,
    ) -> None:
        self.text = text
        self.fields = fields
        self.converter_name = converter_name
        self._items = items
        self._entry = entry

    @property
    def drops_fields(self) -> bool:
        """Whether XLA's converter would drop or mangle some of its fields (the location has a
        dictionary of them; see the module docstring)."""
        return self._entry is not None

    def marked(self, k: int) -> tuple[str, dict[str, Any]]:
        """The location with marker ``K`` in place of its dictionary (as :func:`mark_locations`
        makes it) and the table entry :func:`patch_hlo_proto` writes for that marker."""
        assert self._entry is not None
        marker = f'"{_MARK}{k}:"'
        return f"loc(fused[{', '.join([marker, *self._items])}])", self._entry

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Location({self.text})"


def file_line_location(file: str, line: int) -> Location:
    """The location ``loc("FILE":LINE:0)`` of an op built on a user's line."""
    return Location(
        f"loc({mlir_str(file)}:{line}:0)",
        {k: v for k, v in (("source_file", file), ("source_line", line), ("source_end_line", line)) if v},
        "",
    )


def name_location(name: str) -> Location:
    """The location ``loc("NAME")`` (a parameter's name): XLA's converter takes it for ``op_name``."""
    stem = name.split("@", 1)[0]
    if stem.endswith(":"):  # XLA's converter reads a name ending in ':' as op_type
        return Location(f"loc({mlir_str(name)})", {"op_type": stem[:-1]} if stem[:-1] else {}, "")
    return Location(f"loc({mlir_str(name)})", {"op_name": stem} if stem else {}, stem)


def op_location(
    op_type: str = "",
    op_name: str = "",
    source_file: str = "",
    source_line: int = 0,
    source_end_line: int = 0,
    source_column: int = 0,
    source_end_column: int = 0,
    deduplicated_name: str = "",
    scheduling_name: str = "",
) -> Location:
    """The :class:`Location` of these fields (:func:`location` gives its text)."""
    text, items, extra = _location_text(
        op_type, op_name, source_file, source_line, source_end_line, source_column, source_end_column,
        deduplicated_name, scheduling_name,
    )
    entry: dict[str, Any] | None = None
    if extra:  # what mark_locations would put in its table for this location
        entry = {"op_type": op_type if op_type and "@" not in op_type else ""}
        entry.update(sorted(extra.items()))
    fields: dict[str, Any] = {"op_type": op_type, "op_name": op_name}
    if source_file:
        fields.update(
            source_file=source_file, source_line=source_line, source_end_line=source_end_line or source_line,
            source_column=source_column, source_end_column=source_end_column or source_column,
        )
    fields.update(deduplicated_name=deduplicated_name, scheduling_name=scheduling_name)
    stem = op_name.split("@", 1)[0]
    converter_name = stem if stem and not stem.endswith(":") else ""
    return Location(text, {k: v for k, v in fields.items() if v}, converter_name, tuple(items), entry)


def _location_text(
    op_type: str,
    op_name: str,
    source_file: str,
    source_line: int,
    source_end_line: int,
    source_column: int,
    source_end_column: int,
    deduplicated_name: str,
    scheduling_name: str,
) -> tuple[str, list[str], dict[str, str | int]]:
    """The MLIR location holding these fields (see the module docstring), its list items and its
    dictionary of the fields XLA's converter drops.

    Without ``source_file`` there is no file part (and the numbers are not recorded). A zero
    ``source_end_line`` / ``source_end_column`` means the start line / column, as in MLIR's file
    locations (and so in the HLO XLA's converter writes).
    """
    items: list[str] = []
    extra: dict[str, str | int] = {}
    if op_type:
        if "@" in op_type:
            extra["op_type"] = op_type
        else:
            items.append(loc_str(op_type + ":"))
    if op_name:
        stem = op_name.split("@", 1)[0]
        if stem and not stem.endswith(":"):
            items.append(loc_str(stem))  # what XLA names the instruction after
        if stem != op_name or stem.endswith(":"):
            extra["op_name"] = op_name
    if source_file:
        end_line = source_end_line or source_line
        end_col = source_end_column or source_column
        items.append(_file_item(source_file, source_line, source_column, end_line, end_col))
        if end_line != source_line:
            extra["source_end_line"] = end_line
        if end_col != source_column:
            extra["source_end_column"] = end_col
    if deduplicated_name:
        extra["deduplicated_name"] = deduplicated_name
    if scheduling_name:
        extra["scheduling_name"] = scheduling_name
    if extra:
        body = ", ".join(
            f"{k} = {v if isinstance(v, int) else loc_str(v)}" for k, v in sorted(extra.items())
        )
        return f"loc(fused<{{{body}}}>[{', '.join(items) or 'unknown'}])", items, extra
    if not items:
        return "loc(unknown)", items, extra
    if len(items) == 1:
        return f"loc({items[0]})", items, extra
    return f"loc(fused[{', '.join(items)}])", items, extra


def location(**fields: Any) -> str:
    """The MLIR location text of the OpMetadata ``fields`` (keyword arguments of
    :func:`op_location`)."""
    return op_location(**fields).text


# -- reading locations -----------------------------------------------------------------------------
def _split_items(text: str, start: int) -> tuple[list[str], int] | None:
    """The comma-separated items of the list opening at ``text[start] == '['`` and the index after
    its ``]`` (strings skipped, brackets nested), or None if it does not close."""
    depth = 0
    items: list[str] = []
    item_start = start + 1
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            m = _STR_RE.match(text, i)
            if m is None:
                return None
            i = m.end()
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                last = text[item_start:i].strip()
                if last:
                    items.append(last)
                return items, i + 1
        elif c == "," and depth == 1:
            items.append(text[item_start:i].strip())
            item_start = i + 1
        i += 1
    return None


def _parse_dict(text: str, start: int) -> tuple[dict[str, str | int], int] | None:
    """The ``{key = value, ...}`` at ``text[start] == '{'`` (string and integer values) and the
    index after its ``}``, or None if it holds anything else."""
    out: dict[str, str | int] = {}
    i = start + 1
    if text.startswith("}", i):
        return out, i + 1
    while True:
        m = _KEY_VALUE_RE.match(text, i)
        if m is None:
            return None
        v = m.group(2)
        out[m.group(1)] = _unescape(v) if v.startswith('"') else int(v)
        i = m.end()
        if text.startswith(", ", i):
            i += 2
        elif text.startswith("}", i):
            return out, i + 1
        else:
            return None


def _item_fields(items: list[str], aliases: dict[str, str] | None) -> tuple[dict[str, Any], bool]:
    """The fields XLA's converter reads from a fused location's items, and whether every item was
    a plain name, file location or ``unknown`` (else the fields may be incomplete)."""
    names: list[str] = []
    fields: dict[str, Any] = {}
    plain = True
    for raw in items:
        item = raw
        if item.startswith("#") and aliases is not None:
            item = aliases.get(item, item)
        if item == "unknown":
            continue
        if _STR_RE.fullmatch(item):
            names.append(_unescape(item).split("@", 1)[0])
            continue
        fm = _FILE_RE.fullmatch(item)
        if fm is None:
            plain = False
            continue
        line, col = int(fm.group(2)), int(fm.group(3))
        end_line = int(fm.group(4)) if fm.group(4) else line
        end_col = int(fm.group(5)) if fm.group(5) else col
        fields["source_file"] = _unescape(fm.group(1))
        fields["source_line"], fields["source_column"] = line, col
        fields["source_end_line"], fields["source_end_column"] = end_line, end_col
    op_type = next((nm[:-1] for nm in names if nm.endswith(":")), "")
    if op_type:
        fields["op_type"] = op_type
    op_names = [nm for nm in names if not nm.endswith(":")]
    if any(op_names):
        fields["op_name"] = ";".join(op_names)
    return fields, plain


def _extra_ok(key: str, value: str | int) -> bool:
    """Whether ``key = value`` of a location dictionary is an xlasdk field of the right type."""
    if key not in _EXTRA_KEYS:
        return False
    return isinstance(value, int) == (key in INT_FIELDS)


def _in_string(text: str, line_start: int, i: int) -> bool:
    """Whether ``text[i]`` lies inside a string literal (MLIR strings do not span lines)."""
    return any(m.group(0) == '"' for m in _STR_OR_QUOTE_RE.finditer(text, line_start, i))


def mark_locations(text: str) -> tuple[str, list[dict[str, Any]]] | None:
    """``text`` (an MLIR module, any syntax, location aliases or not) with each location holding
    xlasdk's ``fused<{...}>`` fields made XLA-readable: the dictionary is replaced by a marker
    ``op_type`` name (``"__xlasdk_md_K:"``) leading the list; ``K`` indexes the returned table of
    fields to write with :func:`patch_hlo_proto` after conversion. None when there is none.
    """
    if "fused<{" not in text:
        return None
    aliases: dict[str, str] | None = None
    table: list[dict[str, Any]] = []
    index: dict[tuple[tuple[str, Any], ...], int] = {}
    seen: dict[str, str] = {}  # location text from "fused<{" to its "]" -> replacement
    out: list[str] = []
    last = 0
    pos = 0
    while True:
        start = text.find("fused<{", pos)
        if start < 0:
            break
        pos = start + 7
        if start < last or _in_string(text, text.rfind("\n", 0, start) + 1, start):
            continue
        simple = _SIMPLE_FUSED_RE.match(text, start)
        if simple is not None and simple.group(0) in seen:  # the same location as before
            out.append(text[last:start])
            out.append(seen[simple.group(0)])
            last = pos = simple.end()
            continue
        parsed = _parse_dict(text, start + 6)
        if parsed is None or not text.startswith(">[", parsed[1]):
            continue
        extra, end = parsed
        extra = {k: v for k, v in extra.items() if _extra_ok(k, v)}
        if not extra:
            continue
        split = _split_items(text, end + 1)
        if split is None:
            continue
        items = [it for it in split[0] if it != "unknown"]
        head = text[start : split[1]]
        done = seen.get(head)
        if done is None:
            if aliases is None:
                aliases = {a: b for a, b in _ALIAS_RE.findall(text)} if "#loc" in text else {}
            fields, _ = _item_fields(items, aliases)
            entry: dict[str, Any] = {"op_type": fields.get("op_type", "")}
            entry.update(extra)
            key = tuple(sorted(entry.items()))
            k = index.get(key)
            if k is None:
                k = index[key] = len(table)
                table.append(entry)
            marker = f'"{_MARK}{k}:"'
            done = seen[head] = f"fused[{', '.join([marker, *items])}]"
        out.append(text[last:start])
        out.append(done)
        last = pos = split[1]
    if not table:
        return None
    out.append(text[last:])
    return "".join(out), table


# -- the HLO module proto --------------------------------------------------------------------------
def _varint(b: bytes, i: int) -> tuple[int, int]:
    r = 0
    shift = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << shift
        if not c & 0x80:
            return r, i
        shift += 7


def _encode_varint(v: int) -> bytes:
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        c = v & 0x7F
        v >>= 7
        if v:
            out.append(c | 0x80)
        else:
            out.append(c)
            return bytes(out)


def _fields(b: bytes) -> list[tuple[int, int, int, int]]:
    """``(field number, wire type, start of the field, end of the field)`` of a message;
    for length-delimited fields the payload is ``b[end - length : end]``."""
    out = []
    i = 0
    n = len(b)
    while i < n:
        start = i
        key, i = _varint(b, i)
        wt = key & 7
        if wt == 0:
            _, i = _varint(b, i)
        elif wt == 1:
            i += 8
        elif wt == 2:
            ln, i = _varint(b, i)
            i += ln
        elif wt == 5:
            i += 4
        else:
            raise ValueError(f"unsupported wire type {wt}")
        out.append((key >> 3, wt, start, i))
    return out


def _payload(b: bytes, start: int, end: int) -> bytes:
    _, i = _varint(b, start)
    _, i = _varint(b, i)
    return b[i:end]


def _delimited(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload


def _rewrite(b: bytes, number: int, fn: Any) -> bytes:
    """``b`` with each length-delimited field ``number`` replaced by ``fn(payload)``."""
    out = bytearray()
    for num, wt, start, end in _fields(b):
        if num == number and wt == 2:
            out += _delimited(num, fn(_payload(b, start, end)))
        else:
            out += b[start:end]
    return bytes(out)


def _patch_metadata(md: bytes, table: list[dict[str, Any]]) -> bytes:
    fields = _fields(md)
    op_type = next((_payload(md, s, e) for num, wt, s, e in fields if num == 1 and wt == 2), b"")
    mark = _MARK.encode()
    if not op_type.startswith(mark):
        return md
    try:
        entry = table[int(op_type[len(mark) :].decode())]
    except (ValueError, IndexError):
        return md
    set_numbers = {_PROTO_NUMBER[k] for k in entry}
    kept = [(num, md[s:e]) for num, wt, s, e in fields if num not in set_numbers]
    for k, v in entry.items():
        num = _PROTO_NUMBER[k]
        if isinstance(v, int):
            if 0 < v <= _INT32_MAX:
                kept.append((num, _encode_varint(num << 3) + _encode_varint(v)))
        elif v:
            kept.append((num, _delimited(num, str(v).encode("utf-8"))))
    kept.sort(key=lambda t: t[0])
    return b"".join(raw for _, raw in kept)


def patch_hlo_proto(proto: bytes, table: list[dict[str, Any]]) -> bytes:
    """The serialized ``HloModuleProto`` ``proto`` with the metadata of every instruction that
    carries a :func:`mark_locations` marker ``op_type`` replaced by the fields of its table
    entry (``op_type`` restored; other fields kept)."""
    if _MARK.encode() not in proto:
        return proto

    def instruction(b: bytes) -> bytes:  # HloInstructionProto.metadata = 7
        return _rewrite(b, 7, lambda md: _patch_metadata(md, table))

    def computation(b: bytes) -> bytes:  # HloComputationProto.instructions = 2
        return _rewrite(b, 2, instruction)

    return _rewrite(proto, 3, computation)  # HloModuleProto.computations = 3


# -- a module without its metadata ----------------------------------------------------------------
# HloModuleProto.computations = 3, HloComputationProto.instructions = 2, HloInstructionProto.metadata = 7
_COMPUTATIONS, _INSTRUCTIONS, _METADATA = 3, 2, 7


def without_metadata(proto: bytes) -> bytes:
    """A serialized ``HloModuleProto`` whose instructions carry empty metadata (the rest unchanged)."""

    def computation(b: bytes) -> bytes:
        return _rewrite(b, _INSTRUCTIONS, _instruction_without_metadata)

    return _rewrite(proto, _COMPUTATIONS, computation)


_EMPTY_METADATA = bytes((_METADATA << 3 | 2, 0))  # field 7, length-delimited, 0 bytes


def _instruction_without_metadata(b: bytes) -> bytes:
    """An ``HloInstructionProto`` with each ``metadata`` field emptied: one scan of its fields that
    copies only the spans between metadata fields (the instruction level holds most of a module's
    fields; :func:`xlasdk._rewrite` copies every field)."""
    varint = _varint
    pieces: list[bytes] = []
    kept = 0
    i, n = 0, len(b)
    while i < n:
        start = i
        key = b[i]  # (one-byte varints, the common case, read inline)
        if key < 0x80:
            i += 1
        else:
            key, i = varint(b, i)
        wt = key & 7
        if wt == 2:
            ln = b[i]
            if ln < 0x80:
                i += 1 + ln
            else:
                ln, i = varint(b, i)
                i += ln
            if key >> 3 == _METADATA:
                pieces += (b[kept:start], _EMPTY_METADATA)
                kept = i
        elif wt == 0:
            if b[i] < 0x80:
                i += 1
            else:
                _, i = varint(b, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        else:
            raise ValueError(f"unsupported wire type {wt}")
    if not pieces:
        return b
    pieces.append(b[kept:])
    return b"".join(pieces)
