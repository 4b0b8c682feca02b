"""Which format a file holds: the :class:`Format` enum, file suffixes and content sniffing."""

from __future__ import annotations

import enum
import os
import re
from typing import Final, Literal

from ..errors import FormatError
from .protobuf import _find_module_proto

PathLike = str | os.PathLike[str]


class Format(enum.Enum):
    """The file formats of a computation."""

    HLO_TEXT = "hlo"
    STABLEHLO_TEXT = "mlir"
    PORTABLE_ARTIFACT = "mlirbc"
    HLO_PROTO = "pb"

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS: Final = {
    Format.HLO_TEXT: "HLO text",
    Format.STABLEHLO_TEXT: "StableHLO text",
    Format.PORTABLE_ARTIFACT: "StableHLO portable artifact",
    Format.HLO_PROTO: "HLO module proto",
}

# Longest suffixes first: ".hlo.txt" before ".txt".
_SUFFIXES: Final = (
    (".hlo.txt", Format.HLO_TEXT),
    (".hlo.pb", Format.HLO_PROTO),
    (".hlo", Format.HLO_TEXT),
    (".mlirbc", Format.PORTABLE_ARTIFACT),
    (".mlir", Format.STABLEHLO_TEXT),
    (".pb", Format.HLO_PROTO),
)
_SUFFIX_LIST: Final = ".hlo, .hlo.txt, .txt, .mlir, .mlirbc, .pb"

_BYTECODE_MAGIC: Final = b"ML\xefR"


def format_from_suffix(path: PathLike) -> Format | None:
    """The format a file name's suffix stands for (None for ``.txt`` and unknown suffixes)."""
    name = os.path.basename(os.fspath(path)).lower()
    for suffix, fmt in _SUFFIXES:
        if name.endswith(suffix):
            return fmt
    return None


def _parse_format(value: Format | str) -> Format:
    if isinstance(value, Format):
        return value
    v = str(value).lower().lstrip(".")
    for f in Format:
        if v in (f.value, f.name.lower()):
            return f
    aliases = {"stablehlo": Format.STABLEHLO_TEXT, "artifact": Format.PORTABLE_ARTIFACT, "proto": Format.HLO_PROTO,
               "hlo.txt": Format.HLO_TEXT, "txt": Format.HLO_TEXT, "hlo.pb": Format.HLO_PROTO}
    if v in aliases:
        return aliases[v]
    raise FormatError(f"unknown format {value!r}: use one of hlo, mlir, mlirbc, pb")


# -- sniffing -------------------------------------------------------------------------------------
_MLIR_START: Final = re.compile(r"(module\b|func\.func\b|#loc|\"builtin\.module\"|\"func\.func\"|#\w+\s*=|!\w+\s*=)")


def _strip_leading_comments(text: str) -> str:
    t = text.lstrip()
    while t.startswith("//") or t.startswith("/*"):
        if t.startswith("//"):
            nl = t.find("\n")
            t = "" if nl < 0 else t[nl + 1 :].lstrip()
        else:
            end = t.find("*/")
            t = "" if end < 0 else t[end + 2 :].lstrip()
    return t


def _as_text(data: bytes) -> str | None:
    if b"\x00" in data[:4096]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def sniff_format(data: bytes) -> Format | None:
    """The format of ``data`` from its content, or None when it is none of the formats.

    MLIR bytecode (``ML\\xefR``) is a portable artifact or plain bytecode; text starting with
    ``HloModule`` is HLO text; text starting like an MLIR module is StableHLO text; binary data
    holding an ``HloModuleProto`` (possibly wrapped as XLA dumps write it) is a proto.
    """
    if data.startswith(_BYTECODE_MAGIC):
        return Format.PORTABLE_ARTIFACT
    text = _as_text(data)
    if text is not None:
        head = _strip_leading_comments(text)
        if head.startswith("HloModule"):
            return Format.HLO_TEXT
        if _MLIR_START.match(head):
            return Format.STABLEHLO_TEXT
    try:
        if _find_module_proto(data) is not None:
            return Format.HLO_PROTO
    except ValueError:
        pass
    return None


def jax_exported_hint(data: bytes) -> str | None:
    """A pointer to what loads, when ``data`` looks like ``jax.export``'s ``Exported.serialize()``.

    That file is a flatbuffer (JAX's own format: calling convention, shardings, effects) that
    embeds the StableHLO module as MLIR bytecode; xlasdk loads the module, not the wrapper.
    """
    if data.startswith(_BYTECODE_MAGIC) or len(data) < 16 or _BYTECODE_MAGIC not in data:
        return None
    if _as_text(data) is not None:
        return None
    return (
        "it looks like a jax.export Exported.serialize() file (JAX's flatbuffer around a StableHLO "
        "module): xs.load_computation(path) loads its module (without format=), and "
        "xs.formats.read_jax_export(data) reads it from bytes"
    )



_TEXT_PROTO_SNAPSHOT: Final = re.compile(
    r"(?P<unoptimized>hlo_module|partitions)\s*[{:<]|(?:hlo|arguments|result|execution_platform)\s*[{:<]"
)


def _strip_text_proto_comments(text: str) -> str:
    """``text`` without leading blank lines and ``#`` comment lines (text-format protos' comments)."""
    t = text.lstrip()
    while t.startswith("#"):
        nl = t.find("\n")
        t = "" if nl < 0 else t[nl + 1 :].lstrip()
    return t


def text_snapshot_kind(data: bytes) -> Literal["snapshot", "unoptimized_snapshot"] | None:
    """Which text-format snapshot ``data`` holds, from its first field (what XLA writes with
    ``--xla_dump_hlo_as_text`` beside ``--xla_dump_hlo_unoptimized_snapshots``: an
    ``HloUnoptimizedSnapshot`` starting ``hlo_module {``; an ``HloSnapshot`` starts ``hlo {``), or
    None when ``data`` is binary (a NUL in the first 4 KiB, or no field name first) or other text."""
    head = data[:4096]
    if b"\x00" in head:
        return None
    text = head.decode("utf-8", "replace")  # only the first field's name counts; a bad byte later is the parser's
    m = _TEXT_PROTO_SNAPSHOT.match(_strip_text_proto_comments(text))
    if m is None:
        return None
    return "unoptimized_snapshot" if m.group("unoptimized") else "snapshot"
