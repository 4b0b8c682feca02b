"""The parser of XLA's sharding notation (``HloSharding.parse``) and of replica groups.

It reads the text into a :class:`ParsedSharding`, the notation's fields as written, and knows
nothing of :class:`~xlasdk.sharding.HloSharding`, which builds (and checks) the sharding from
them: the parser sits below the value it parses. The notations over a named mesh (XLA's
``{mesh[...], [...]}`` and Shardy's ``#sdy.sharding<@mesh, ...>``) are read by
:mod:`xlasdk.sharding._mesh` on the same tokens.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Final, NamedTuple

import numpy as np

from ..errors import ShapeError
from . import _mesh
from ._fields import _SIMPLE, _SUBGROUP_ORDER, _subgroup_kinds
from ._mesh import Mesh, MeshSharding

_TOKEN_RE: Final = re.compile(
    r'\s*(?:(<=)|([{}\[\](),=<>?:@])|(-?\d+)|([A-Za-z_#][A-Za-z0-9_.\-]*)|("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'))')
_HINT: Final = ("XLA's sharding notation looks like {devices=[2,1]0,1}, {replicated}, {maximal device=0} or "
                "{mesh['x'=2], [{'x'}, {}]}")


class ParsedSharding(NamedTuple):
    """One sharding as the text wrote it, not yet checked."""

    kind: str  # "replicated", "manual", "unknown", "unreduced", "maximal", "tiled" or "tuple"
    device: int = -1  # maximal
    dims: tuple[int, ...] = ()  # tiled: the tile assignment dimensions
    devices: tuple[int, ...] | None = None  # tiled: the device list, or None with an iota
    iota: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # tiled: (reshape dims, transpose perm)
    subgroups: tuple[str, ...] = ()  # tiled: the kinds of the trailing subgroup dimensions
    shard_group: tuple[str, int] | None = None  # tiled: ("as" or "like", group id)
    elements: tuple[ParsedSharding, ...] = ()  # tuple
    named: MeshSharding | None = None  # the sharding over a named mesh, as written (the fields: what it means)


def parse_sharding(text: str, meshes: Mapping[str, str] | Iterable[str] | None = None) -> ParsedSharding:
    """The fields of ``text`` in XLA's sharding notation (or Shardy's, whose ``@name`` meshes
    ``meshes`` defines: see :func:`xlasdk.sharding._mesh.mesh_table`).

    Raises
    ------
    ShapeError
        For text that is not a sharding, naming the column and what was expected.
    """
    return _Parser(text, _mesh.mesh_table(meshes)).parse()


def parse_replica_groups(text: str) -> tuple[tuple[int, ...], ...]:
    """The device groups of a collective's ``replica_groups=`` value in any notation XLA writes:
    ``{{0,1},{2,3}}``, an iota ``[2,2]<=[4]`` / ``[2,2]<=[2,2]T(1,0)``, or mesh axes
    ``mesh['x'=2,'y'=2] {'x'}``.

    Raises
    ------
    ShapeError
        For text in none of them, naming the column and what was expected.
    """
    return _Parser(text, {}, what="replica groups").replica_groups()


def _from_named(ms: MeshSharding) -> ParsedSharding:
    if ms.kind == "maximal":
        assert ms.mesh.maximal is not None
        return ParsedSharding("maximal", device=ms.mesh.maximal, named=ms)
    if ms.kind != "tiled":
        return ParsedSharding(ms.kind, named=ms)
    if ms.mesh.devices is None and ms.mesh.iota is None:  # devices 0, 1, ...: the assignment is an iota
        dims, pieces, order, kinds = ms.iota_assignment()
        return ParsedSharding("tiled", dims=dims, iota=(pieces, order), subgroups=kinds, named=ms)
    dims, devices, kinds = ms.tile_assignment()
    return ParsedSharding("tiled", dims=dims, devices=devices, subgroups=kinds, named=ms)


class _Parser:
    """Recursive descent over XLA's sharding grammar (``HloParser::ParseSharding``)."""

    def __init__(self, text: str, meshes: dict[str, str] | None = None, what: str = "sharding") -> None:
        self.text = text
        self.meshes = meshes or {}
        self.what = what
        self.toks: list[tuple[str, str, int]] = []  # (kind, text, column)
        pos = 0
        n = len(text)
        while True:
            while pos < n and text[pos].isspace():
                pos += 1
            if pos >= n:
                break
            m = _TOKEN_RE.match(text, pos)
            if m is None or m.end() == pos:
                raise self._error_at(pos, "unexpected character " + repr(text[pos]))
            kind = "op" if m.group(1) or m.group(2) else "int" if m.group(3) else "word" if m.group(4) else "str"
            self.toks.append((kind, m.group(m.lastindex or 0), m.start(m.lastindex or 0)))
            pos = m.end()
        self.i = 0

    def _error_at(self, col: int, what: str) -> ShapeError:
        shown = self.text if len(self.text) <= 200 else self.text[:200] + "..."
        if self.what != "sharding":
            return ShapeError(f"{self.what}: {what} at column {col + 1} of {shown!r} (XLA writes them as "
                              "{{0,1},{2,3}}, [2,2]<=[4] or mesh['x'=2,'y'=2] {'x'})")
        return ShapeError(f"HloSharding.parse: {what} at column {col + 1} of {shown!r} ({_HINT})")

    def _error(self, what: str) -> ShapeError:
        col = self.toks[self.i][2] if self.i < len(self.toks) else len(self.text)
        return self._error_at(col, what)

    def _peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def _next(self, what: str) -> tuple[str, str, int]:
        if self.i >= len(self.toks):
            raise self._error(f"expected {what}, got the end of the text")
        t = self.toks[self.i]
        self.i += 1
        return t

    def _expect(self, text: str) -> None:
        t = self._next(repr(text))
        if t[1] != text:
            self.i -= 1
            raise self._error(f"expected {text!r}, got {t[1]!r}")

    def _int(self) -> int:
        t = self._next("a number")
        if t[0] != "int":
            self.i -= 1
            raise self._error(f"expected a number, got {t[1]!r}")
        if t[1].startswith("-"):
            self.i -= 1
            raise self._error(f"expected a number >= 0, got {t[1]}")
        return int(t[1])

    def _iota(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """An iota's ``[reshape]T(perm)`` after its ``<=``: the dimensions its devices are laid out
        in and their transpose (the identity without ``T``)."""
        self._expect("[")
        reshape = self._int_list("]")
        perm = tuple(range(len(reshape)))
        if self._peek() == "T":
            self.i += 1
            self._expect("(")
            perm = self._int_list(")")
        return reshape, perm

    def _int_list(self, close: str) -> tuple[int, ...]:
        out = [self._int()]
        while self._peek() == ",":
            self.i += 1
            out.append(self._int())
        self._expect(close)
        return tuple(out)

    def parse(self) -> ParsedSharding:
        if not self.toks:
            raise self._error_at(0, "expected a sharding, got empty text")
        head = self._peek() or ""
        s = self._sdy() if head.startswith("#") else self._sharding(top=True)
        if self.i != len(self.toks):
            raise self._error(f"unexpected {self._peek()!r} after the sharding")
        return s

    def _sdy(self) -> ParsedSharding:
        """Shardy's ``#sdy.sharding<...>`` or ``#sdy.sharding_per_value<[<...>, ...]>``."""
        word = self._next("#sdy.sharding<...>")[1]
        if word not in ("#sdy.sharding", "#sdy.sharding_per_value"):
            self.i -= 1
            raise self._error(f"expected #sdy.sharding<...> or #sdy.sharding_per_value<[...]>, got {word!r}")
        self._expect("<")
        if word == "#sdy.sharding":
            return _from_named(_mesh.parse_sdy_sharding_body(self, self.meshes, self._mesh_of))
        self._expect("[")
        elems: list[ParsedSharding] = []
        while self._peek() != "]":
            if elems:
                self._expect(",")
            self._expect("<")
            elems.append(_from_named(_mesh.parse_sdy_sharding_body(self, self.meshes, self._mesh_of)))
        self.i += 1
        self._expect(">")
        return ParsedSharding("tuple", elements=tuple(elems))

    def _mesh_of(self, text: str) -> Mesh:
        """The mesh of a ``#sdy.mesh<...>`` text (``<...>`` alone too), from ``meshes=``."""
        inner = _Parser(text.strip().removeprefix("#sdy.mesh").removeprefix("mesh"), self.meshes, self.what)
        if inner._peek() != "<":
            raise self._error(f"expected a mesh such as #sdy.mesh<[\"x\"=4]>, got {text!r}")
        inner.i += 1
        mesh = _mesh.parse_sdy_mesh_body(inner)
        if inner.i != len(inner.toks):
            raise inner._error(f"unexpected {inner._peek()!r} after the mesh")
        return mesh

    def replica_groups(self) -> tuple[tuple[int, ...], ...]:
        head = self._peek()
        if head is None:
            raise self._error_at(0, "expected replica groups, got empty text")
        if head in ("mesh", "maximal_mesh"):
            mesh = _mesh.parse_mesh(self)
            axes = _mesh._axis_list(self, mesh, sdy=False, allow_open=False)[0] if self._peek() == "{" else ()
            try:
                groups = _mesh.mesh_groups(mesh, axes)
            except ShapeError as e:
                raise self._error(str(e)) from None
        elif head == "[":
            self.i += 1
            dims = self._int_list("]")
            self._expect("<=")
            reshape, perm = self._iota()
            if len(dims) != 2 or math.prod(dims) != math.prod(reshape) or sorted(perm) != list(range(len(reshape))):
                raise self._error(f"expected an iota [groups,size]<=[dims]T(perm) of as many devices as groups x "
                                  f"size and a permutation of the dims, got {list(dims)}<={list(reshape)}T{perm}")
            a = np.arange(math.prod(reshape), dtype=np.int64).reshape(reshape).transpose(perm).reshape(dims)
            groups = tuple(tuple(int(d) for d in g) for g in a)
        else:
            self._expect("{")
            out: list[tuple[int, ...]] = []
            while self._peek() != "}":
                if out:
                    self._expect(",")
                self._expect("{")
                if self._peek() == "}":
                    self.i += 1
                    out.append(())
                else:
                    out.append(self._int_list("}"))
            self.i += 1
            groups = tuple(out)
        if self.i != len(self.toks):
            raise self._error(f"unexpected {self._peek()!r} after the replica groups")
        return groups

    def _sharding(self, top: bool) -> ParsedSharding:
        self._expect("{")
        if self._peek() in ("mesh", "maximal_mesh"):
            return _from_named(_mesh.parse_mesh_sharding(self))
        if self._peek() == "}":
            self.i += 1
            return ParsedSharding("tuple") if top else self._fail_empty()
        if self._peek() == "{":
            if not top:
                raise self._error("tuple shardings cannot nest")
            elems = [self._sharding(top=False)]
            while self._peek() == ",":
                self.i += 1
                elems.append(self._sharding(top=False))
            self._expect("}")
            return ParsedSharding("tuple", elements=tuple(elems))
        return self._single()

    def _fail_empty(self) -> ParsedSharding:
        self.i -= 1
        raise self._error("expected a sharding inside '{}'")

    def _single(self) -> ParsedSharding:
        kind: str | None = None
        device: int | None = None
        dims: tuple[int, ...] | None = None
        devices: tuple[int, ...] | None = None
        iota: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        subgroups: list[str] = []
        replicate_last = False
        shard_group: tuple[str, int] | None = None
        while self._peek() != "}":
            t = self._next("'}'")
            word = t[1]
            if t[0] != "word":
                self.i -= 1
                raise self._error(f"unexpected {word!r}")
            if word in (*_SIMPLE, "maximal"):
                if kind is not None:
                    self.i -= 1
                    raise self._error(f"{word!r} after {kind!r}")
                kind = word
            elif word == "device":
                self._expect("=")
                device = self._int()
            elif word == "devices":
                self._expect("=")
                self._expect("[")
                dims = self._int_list("]")
                if self._peek() == "<=":
                    self.i += 1
                    iota = self._iota()
                else:
                    devs = [self._int()]
                    while self._peek() == ",":
                        self.i += 1
                        devs.append(self._int())
                    devices = tuple(devs)
            elif word == "last_tile_dim_replicate":
                replicate_last = True
            elif word == "last_tile_dims":
                self._expect("=")
                self._expect("{")
                while True:
                    k = self._next("a subgroup kind")
                    if k[0] != "word" or k[1] not in _SUBGROUP_ORDER:
                        self.i -= 1
                        raise self._error(
                            f"unknown last_tile_dims kind {k[1]!r}; expected one of {', '.join(_SUBGROUP_ORDER)}"
                        )
                    subgroups.append(k[1])
                    if self._peek() != ",":
                        break
                    self.i += 1
                self._expect("}")
            elif word == "metadata":
                self._expect("=")
                self._skip_group()
            elif word in ("shard_as", "shard_like"):
                shard_group = (word[6:], self._int())
            else:
                self.i -= 1
                raise self._error(f"unknown sharding attribute {word!r}")
        self._expect("}")
        if kind == "maximal":
            if device is None:
                raise self._error("'maximal' needs 'device=N'")
            return ParsedSharding("maximal", device=device)
        if kind is not None:
            if dims is not None or device is not None:
                raise self._error(f"'{kind}' takes no devices")
            return ParsedSharding(kind)
        if dims is None:
            raise self._error("expected 'replicated', 'manual', 'maximal device=N' or 'devices=[...]'")
        if device is not None:
            raise self._error("'device=' belongs to 'maximal'")
        kinds = _subgroup_kinds(subgroups, replicate_last)
        return ParsedSharding("tiled", dims=dims, devices=None if iota is not None else devices, iota=iota,
                              subgroups=kinds, shard_group=shard_group)

    def _skip_group(self) -> None:
        """Skip a balanced ``{...}`` (metadata)."""
        self._expect("{")
        depth = 1
        while depth:
            t = self._next("'}'")
            if t[1] == "{":
                depth += 1
            elif t[1] == "}":
                depth -= 1

