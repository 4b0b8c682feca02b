"""Shardings and replica groups written over a named device mesh: XLA's mesh notation and Shardy's.

Newer XLA (jaxlib 0.12's dumps) writes a sharding over a named mesh instead of a tile assignment,
and the device groups of a collective as mesh axes::

    {mesh['x'=2,'y'=2], [{'x'}, {}]}                  dimension 0 split over axis x, replicated over y
    {mesh['x'=4], [{'x':(1)2}, {'x':(2)2}]}           sub-axes: the major and the minor half of x
    {mesh['x'=2,'y'=2], [{'x', ?}, {}], replicated={'y'}, unreduced={...}, manual={...}}
    {mesh['x'=4], replicated}   {mesh['x'=4], manual}   {mesh['x'=4], unreduced}
    {maximal_mesh[device_id=3]}
    {mesh['x'=2,'y'=2], device_ids=(3,1,2,0), [...]}  a mesh whose devices are not 0, 1, 2, ... in order
    replica_groups=mesh['axis_0'=2,'axis_1'=2] {'axis_0'}   one group per index of axis_1

(newer XLA writes axis names without quotes: ``mesh[x=4]``, ``{x}``; both are read). Shardy's
attributes, which JAX's StableHLO lowerings and ``frontend_attributes`` carry, say the same over a
mesh they name: ``#sdy.sharding<@mesh, [{"x"}, {}]>`` with ``@mesh = #sdy.mesh<["x"=4]>``.

A :class:`MeshSharding` is such a sharding as written; :meth:`MeshSharding.tile_assignment` gives
the tile assignment it means (what :class:`~xlasdk.HloSharding` holds, in the ``{devices=[...]}``
notation every jaxlib reads), :meth:`MeshSharding.to_hlo` / :meth:`MeshSharding.to_sdy` print it
back. :func:`replica_groups` reads every notation of ``replica_groups=`` (explicit lists, iota,
mesh axes) into the device groups.

The mesh's devices, row-major over its axes, are ``0, 1, ...`` unless ``device_ids`` says otherwise.
An axis split in sub-axes ``'x':(pre)size`` is read major to minor: ``pre`` is the product of the
sizes of the sub-axes before it, so ``'x':(1)2`` of ``'x'=8`` is its major factor 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple, Protocol

import numpy as np

from ..errors import ShapeError

_KINDS: Final = ("replicated", "manual", "unreduced")


class Cursor(Protocol):
    """The token stream of :mod:`xlasdk.sharding._parse` (its ``_Parser``), as this module reads it."""

    toks: list[tuple[str, str, int]]
    i: int

    def _peek(self) -> str | None: ...
    def _next(self, what: str) -> tuple[str, str, int]: ...
    def _expect(self, text: str) -> None: ...
    def _int(self) -> int: ...
    def _error(self, what: str) -> ShapeError: ...


class Mesh(NamedTuple):
    """A named device mesh: its axes (major to minor) and the device at each of its positions."""

    axes: tuple[tuple[str, int], ...]  # (name, size)
    devices: tuple[int, ...] | None = None  # row-major over the axes; None: 0, 1, 2, ...
    iota: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # device_ids=([dims]T(perm))
    maximal: int | None = None  # maximal_mesh[device_id=N]

    @property
    def size(self) -> int:
        return 1 if self.maximal is not None else math.prod(n for _, n in self.axes)

    def axis_index(self, name: str) -> int:
        for k, (a, _) in enumerate(self.axes):
            if a == name:
                return k
        raise ShapeError(f"the mesh {self.to_hlo()} has no axis {name!r}")

    def device_array(self) -> np.ndarray[Any, Any]:
        """The device at each position of the mesh, an array of the axes' sizes."""
        sizes = tuple(n for _, n in self.axes)
        if self.devices is not None:
            return np.asarray(self.devices, dtype=np.int64).reshape(sizes)
        if self.iota is not None:
            reshape, perm = self.iota
            return np.arange(math.prod(reshape), dtype=np.int64).reshape(reshape).transpose(perm).reshape(sizes)
        return np.arange(math.prod(sizes), dtype=np.int64).reshape(sizes)

    def to_hlo(self) -> str:
        """XLA's notation: ``mesh['x'=2,'y'=2]`` (``, device_ids=(...)`` when not in order)."""
        if self.maximal is not None:
            return f"maximal_mesh[device_id={self.maximal}]"
        text = "mesh[" + ",".join(f"{_quote(a)}={n}" for a, n in self.axes) + "]"
        if self.devices is not None:
            text += ", device_ids=(" + ",".join(map(str, self.devices)) + ")"
        elif self.iota is not None:
            text += ", device_ids=(" + _iota_text(self.iota) + ")"
        return text

    def to_sdy(self) -> str:
        """Shardy's attribute: ``#sdy.mesh<["x"=2, "y"=2]>`` (``, device_ids=[...]`` when not in order)."""
        if self.maximal is not None:
            return f"#sdy.mesh<[], device_ids=[{self.maximal}]>"
        text = "#sdy.mesh<[" + ", ".join(f'"{a}"={n}' for a, n in self.axes) + "]"
        if self.devices is not None or self.iota is not None:
            text += ", device_ids=[" + ", ".join(str(int(d)) for d in self.device_array().reshape(-1)) + "]"
        return text + ">"


class AxisRef(NamedTuple):
    """A mesh axis, or its sub-axis ``(pre)size``, as a sharding or a replica group names it."""

    name: str
    sub: tuple[int, int] | None = None  # (pre_size, size)

    def text(self, sdy: bool) -> str:
        name = f'"{self.name}"' if sdy else _quote(self.name)
        return name if self.sub is None else f"{name}:({self.sub[0]}){self.sub[1]}"


class MeshSharding(NamedTuple):
    """A sharding over a named mesh, as XLA's mesh notation or Shardy writes it.

    ``kind`` is ``"tiled"`` (``dims``: the axes each array dimension is split over, major to
    minor; ``open_dims``: the dimensions written open, ``{'x', ?}``), ``"replicated"``,
    ``"manual"``, ``"unreduced"`` or ``"maximal"`` (the mesh's one device). ``replicated``,
    ``unreduced``, ``manual``: the axes named so (every axis a tiled sharding does not split is
    replicated, named or not). ``mesh_name``: Shardy's ``@name`` of the mesh, None when it was
    written inline.
    """

    mesh: Mesh
    kind: str
    dims: tuple[tuple[AxisRef, ...], ...] = ()
    open_dims: tuple[bool, ...] = ()
    replicated: tuple[AxisRef, ...] = ()
    unreduced: tuple[AxisRef, ...] = ()
    manual: tuple[AxisRef, ...] = ()
    mesh_name: str | None = None

    def to_hlo(self) -> str:
        """XLA's mesh notation: ``{mesh['x'=4], [{'x'}, {}]}``."""
        head = "{" + self.mesh.to_hlo()
        if self.kind == "maximal":
            return head + "}"
        if self.kind != "tiled":
            return head + f", {self.kind}}}"
        text = head + ", [" + ", ".join(_dim_text(d, o, False) for d, o in zip(self.dims, self.open_dims,
                                                                            strict=True)) + "]"
        for kind in _KINDS:
            refs = getattr(self, kind)
            if refs:
                text += f", {kind}={{" + ", ".join(r.text(False) for r in refs) + "}"
        return text + "}"

    def to_sdy(self) -> str:
        """Shardy's attribute: ``#sdy.sharding<@mesh, [{"x"}, {}]>`` (the mesh inline,
        ``mesh<["x"=4]>``, when it had no name)."""
        mesh = f"@{self.mesh_name}" if self.mesh_name else self.mesh.to_sdy().removeprefix("#sdy.")
        if self.kind == "maximal":
            return f"#sdy.sharding<{mesh}, []>"
        if self.kind in ("unreduced", "manual") or self.manual:
            raise ShapeError(f"Shardy has no sharding attribute for a manual or wholly unreduced value "
                             f"({self.to_hlo()})")
        dims = ", ".join(_dim_text(d, o, True) for d, o in zip(self.dims, self.open_dims, strict=True))
        text = f"#sdy.sharding<{mesh}, [{dims}]"
        for kind in ("replicated", "unreduced"):
            refs = getattr(self, kind)
            if refs:
                text += f", {kind}={{" + ", ".join(r.text(True) for r in refs) + "}"
        return text + ">"

    def tile_assignment(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[str, ...]]:
        """``(tile assignment dimensions, devices row-major over them, subgroup kinds)`` of a
        tiled sharding: one dimension per array dimension, the product of its axes' sizes, then
        a ``manual``, an ``unreduced`` and a ``replicated`` subgroup dimension (every axis no
        array dimension uses, named or not).

        Raises
        ------
        ShapeError
            If an axis is used twice, or sub-axes of an axis do not divide it.
        """
        dims, sizes, order, kinds = self.iota_assignment()
        devices = self.mesh.device_array().reshape(sizes).transpose(order).reshape(-1)
        return dims, tuple(int(d) for d in devices), kinds

    def iota_assignment(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[str, ...]]:
        """:meth:`tile_assignment` as ``(dims, pieces, order, kinds)``: the mesh's device array cut in
        ``pieces`` (its axes, split where sub-axes split them) and transposed by ``order`` is the
        tile assignment (for a mesh of devices ``0, 1, ...``, the iota ``<=[pieces]T(order)``)."""
        chunks = _chunks(self.mesh, [*(r for d in self.dims for r in d), *self.replicated, *self.unreduced,
                                     *self.manual])
        used: set[int] = set()
        order: list[int] = []
        dims: list[int] = []
        kinds: list[str] = []

        def take(refs: Iterable[AxisRef]) -> int:
            size = 1
            for r in refs:
                for c in _ref_chunks(self.mesh, chunks, r):
                    if c in used:
                        raise ShapeError(f"the sharding {self.to_hlo()} uses axis {r.text(False)} twice")
                    used.add(c)
                    order.append(c)
                    size *= chunks[c][3]
            return size

        for d in self.dims:
            dims.append(take(d))
        for kind in ("manual", "unreduced"):
            refs = getattr(self, kind)
            if refs:
                dims.append(take(refs))
                kinds.append(kind)
        replicated = take(self.replicated)  # the axes named replicated, then the rest in mesh order
        rest = [k for k in range(len(chunks)) if k not in used]
        order.extend(rest)
        replicated *= math.prod(chunks[k][3] for k in rest)
        if replicated > 1:
            dims.append(replicated)
            kinds.append("replicated")
        if not dims:
            dims.append(1)
        return tuple(dims), tuple(c[3] for c in chunks), tuple(order), tuple(kinds)


def _chunks(mesh: Mesh, refs: Iterable[AxisRef]) -> list[tuple[int, int, int, int]]:
    """The mesh's axes cut where any of ``refs`` cuts them: ``[(axis, lo, hi, size)]`` major to minor
    (``lo``/``hi``: the products of the sizes before the piece and up to its end)."""
    bounds: list[set[int]] = [{1, n} for _, n in mesh.axes]
    for r in refs:
        k = mesh.axis_index(r.name)
        n = mesh.axes[k][1]
        if r.sub is not None:
            pre, size = r.sub
            if pre < 1 or size < 1 or n % (pre * size):
                raise ShapeError(f"sub-axis {r.text(False)} does not divide axis {_quote(r.name)} of size {n} "
                                 f"(expected (pre)size with pre*size dividing {n})")
            bounds[k] |= {pre, pre * size}
    chunks: list[tuple[int, int, int, int]] = []
    for k, b in enumerate(bounds):
        cuts = sorted(b)
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            if hi % lo:
                raise ShapeError(f"the sub-axes of axis {_quote(mesh.axes[k][0])} of size {mesh.axes[k][1]} cut it "
                                 f"at {', '.join(map(str, cuts))}, which do not nest (expected each cut to divide "
                                 "the next)")
            chunks.append((k, lo, hi, hi // lo))
    return chunks or [(0, 1, 1, 1)]


def _ref_chunks(mesh: Mesh, chunks: list[tuple[int, int, int, int]], r: AxisRef) -> list[int]:
    k = mesh.axis_index(r.name)
    lo, hi = (1, mesh.axes[k][1]) if r.sub is None else (r.sub[0], r.sub[0] * r.sub[1])
    return [c for c, (axis, a, b, _) in enumerate(chunks) if axis == k and a >= lo and b <= hi]


def _quote(name: str) -> str:
    return "'" + name + "'"


def _dim_text(refs: tuple[AxisRef, ...], is_open: bool, sdy: bool) -> str:
    parts = [r.text(sdy) for r in refs] + (["?"] if is_open else [])
    return "{" + ", ".join(parts) + "}"


def _iota_text(iota: tuple[tuple[int, ...], tuple[int, ...]]) -> str:
    reshape, perm = iota
    text = "[" + ",".join(map(str, reshape)) + "]"
    return text + ("T(" + ",".join(map(str, perm)) + ")" if len(reshape) > 1 else "")


# -- parsing (on the token stream of xlasdk.sharding._parse) ------------------------------------------
def _name(c: Cursor, what: str) -> str:
    t = c._next(what)
    if t[0] == "str":
        return t[1][1:-1]
    if t[0] in ("word", "int"):
        return t[1]
    c.i -= 1
    raise c._error(f"expected {what}, got {t[1]!r}")


def _ints_until(c: Cursor, close: str) -> tuple[int, ...]:
    out: list[int] = []
    if c._peek() == close:
        c.i += 1
        return ()
    while True:
        out.append(c._int())
        if c._peek() != ",":
            break
        c.i += 1
    c._expect(close)
    return tuple(out)


def parse_mesh(c: Cursor) -> Mesh:
    """``mesh['x'=2,'y'=2]`` (with ``, device_ids=(...)``) or ``maximal_mesh[device_id=N]``; the
    current token is the word ``mesh`` or ``maximal_mesh``."""
    word = c._next("'mesh'")[1]
    c._expect("[")
    if word == "maximal_mesh":
        if _name(c, "'device_id'") != "device_id":
            c.i -= 1
            raise c._error("expected 'device_id=' in maximal_mesh[...]")
        c._expect("=")
        device = c._int()
        c._expect("]")
        return Mesh((), maximal=device)
    if word != "mesh":
        c.i -= 1
        raise c._error(f"expected 'mesh[...]' or 'maximal_mesh[...]', got {word!r}")
    axes: list[tuple[str, int]] = []
    while True:
        name = _name(c, "an axis name ('x'=4)")
        c._expect("=")
        size = c._int()
        if size < 1:
            c.i -= 1
            raise c._error(f"expected an axis size >= 1, got {size}")
        if any(a == name for a, _ in axes):
            raise c._error(f"axis {_quote(name)} appears twice in the mesh")
        axes.append((name, size))
        if c._peek() != ",":
            break
        c.i += 1
    c._expect("]")
    mesh = Mesh(tuple(axes))
    if c._peek() == "," and c.i + 1 < len(c.toks) and c.toks[c.i + 1][1] == "device_ids":
        c.i += 2
        c._expect("=")
        c._expect("(")
        if c._peek() == "[":
            c.i += 1
            reshape = _ints_until(c, "]")
            perm = tuple(range(len(reshape)))
            if c._peek() == "T":
                c.i += 1
                c._expect("(")
                perm = _ints_until(c, ")")
            c._expect(")")
            mesh = _checked(c, mesh._replace(iota=(reshape, perm)))
        else:
            mesh = _checked(c, mesh._replace(devices=_ints_until(c, ")")))
    return mesh


def _checked(c: Cursor, mesh: Mesh) -> Mesh:
    n = mesh.size
    if mesh.devices is not None and sorted(mesh.devices) != list(range(n)):
        raise c._error(f"expected device_ids to be a permutation of 0..{n - 1} for {mesh.to_hlo().split(',')[0]}, "
                       f"got {len(mesh.devices)} ids")
    if mesh.iota is not None:
        reshape, perm = mesh.iota
        if math.prod(reshape) != n or sorted(perm) != list(range(len(reshape))):
            raise c._error(f"expected device_ids=([dims]T(perm)) of {n} devices with perm a permutation of the "
                           f"dims, got {_iota_text(mesh.iota)}")
    return mesh


def _axis_ref(c: Cursor, mesh: Mesh, sdy: bool) -> AxisRef:
    name = _name(c, "an axis name")
    if sdy and name.isdigit():
        c.i -= 1
        raise c._error(f"expected an axis name in quotes, got {name}")
    if mesh.maximal is not None or all(a != name for a, _ in mesh.axes):
        if name.isdigit() and int(name) < len(mesh.axes):  # newer XLA may name an axis by its index
            name = mesh.axes[int(name)][0]
        else:
            c.i -= 1
            raise c._error(f"expected an axis of {mesh.to_hlo()}, got {name!r}")
    if c._peek() == ":":
        c.i += 1
        c._expect("(")
        pre = c._int()
        c._expect(")")
        size = c._int()
        n = mesh.axes[mesh.axis_index(name)][1]
        if pre < 1 or size < 2 or n % (pre * size) or pre * size > n or size == n:
            raise c._error(f"expected a sub-axis ':(pre)size' of axis {_quote(name)} (size {n}) with size > 1 and "
                           f"pre*size dividing {n}, got :({pre}){size}")
        return AxisRef(name, (pre, size))
    return AxisRef(name)


def _axis_list(c: Cursor, mesh: Mesh, sdy: bool, allow_open: bool) -> tuple[tuple[AxisRef, ...], bool]:
    c._expect("{")
    refs: list[AxisRef] = []
    is_open = False
    while c._peek() != "}":
        if refs or is_open:
            c._expect(",")
        if c._peek() == "?" and allow_open:
            c.i += 1
            is_open = True
            continue
        if is_open:
            raise c._error("expected '}' after '?' (the open mark comes last)")
        refs.append(_axis_ref(c, mesh, sdy))
    c.i += 1
    return tuple(refs), is_open


def parse_mesh_sharding(c: Cursor) -> MeshSharding:
    """XLA's mesh notation, after its ``{``: ``mesh[...], [{...}, ...], replicated={...}}``; the
    closing ``}`` is read too."""
    mesh = parse_mesh(c)
    if mesh.maximal is not None:
        _skip_metadata(c)
        c._expect("}")
        return MeshSharding(mesh, "maximal")
    c._expect(",")
    if c._peek() in _KINDS:
        kind = c._next("a kind")[1]
        _skip_metadata(c)
        c._expect("}")
        return MeshSharding(mesh, kind)
    if c._peek() != "[":
        t = c._next("'['")
        c.i -= 1
        raise c._error(f"expected '[' (one {{axes}} per dimension) or replicated/manual/unreduced after the mesh, "
                       f"got {t[1]!r}")
    dims, opens = _dim_list(c, mesh, sdy=False)
    named: dict[str, tuple[AxisRef, ...]] = {}
    while c._peek() == ",":
        c.i += 1
        key = _name(c, "replicated=, unreduced=, manual= or metadata=")
        if key == "metadata":
            c._expect("=")
            _skip_group(c)
            continue
        if key not in _KINDS or key in named:
            c.i -= 1
            raise c._error(f"expected replicated=, unreduced=, manual= or metadata= (each once), got {key!r}")
        c._expect("=")
        named[key] = _axis_list(c, mesh, sdy=False, allow_open=False)[0]
    c._expect("}")
    return _made(c, MeshSharding(mesh, "tiled", dims, opens, named.get("replicated", ()), named.get("unreduced", ()),
                                 named.get("manual", ())))


def _dim_list(c: Cursor, mesh: Mesh, sdy: bool) -> tuple[tuple[tuple[AxisRef, ...], ...], tuple[bool, ...]]:
    c._expect("[")
    dims: list[tuple[AxisRef, ...]] = []
    opens: list[bool] = []
    while c._peek() != "]":
        if dims:
            c._expect(",")
        refs, is_open = _axis_list(c, mesh, sdy, allow_open=True)
        dims.append(refs)
        opens.append(is_open)
        t = c._peek()
        if sdy and t is not None and len(t) > 1 and t[0] == "p" and t[1:].isdigit():  # priority: {"x"}p1
            c.i += 1
    c.i += 1
    return tuple(dims), tuple(opens)


def _made(c: Cursor, s: MeshSharding) -> MeshSharding:
    try:
        s.tile_assignment()
    except ShapeError as e:
        raise c._error(str(e)) from None
    return s


def _skip_metadata(c: Cursor) -> None:
    if c._peek() == "," and c.i + 1 < len(c.toks) and c.toks[c.i + 1][1] == "metadata":
        c.i += 2
        c._expect("=")
        _skip_group(c)


def _skip_group(c: Cursor) -> None:
    c._expect("{")
    depth = 1
    while depth:
        t = c._next("'}'")[1]
        depth += 1 if t == "{" else -1 if t == "}" else 0


# -- Shardy ---------------------------------------------------------------------------------------------
def mesh_table(meshes: Mapping[str, str] | Iterable[str] | None) -> dict[str, str]:
    """``{name: "#sdy.mesh<...>"}`` from a mapping or from ``Partitioning.meshes``' lines
    (``@mesh = #sdy.mesh<["x"=4]>``)."""
    if meshes is None:
        return {}
    if isinstance(meshes, Mapping):
        return {str(k).lstrip("@"): str(v) for k, v in meshes.items()}
    if isinstance(meshes, str):
        meshes = [meshes]
    out: dict[str, str] = {}
    for line in meshes:
        name, sep, value = str(line).partition("=")
        if not sep:
            raise ShapeError(f"expected a mesh as '@name = #sdy.mesh<[...]>', got {line!r}")
        out[name.strip().lstrip("@")] = value.strip()
    return out


def parse_sdy_mesh_body(c: Cursor) -> Mesh:
    """Shardy's mesh after its ``<``: ``["x"=2, "y"=2](, device_ids=[...])?>`` (``>`` read too)."""
    c._expect("[")
    axes: list[tuple[str, int]] = []
    while c._peek() != "]":
        if axes:
            c._expect(",")
        name = _name(c, 'an axis name ("x"=4)')
        c._expect("=")
        size = c._int()
        if size < 1 or any(a == name for a, _ in axes):
            c.i -= 1
            raise c._error(f'expected a new axis with a size >= 1, got "{name}"={size}')
        axes.append((name, size))
    c.i += 1
    devices: tuple[int, ...] | None = None
    if c._peek() == ",":
        c.i += 1
        if _name(c, "device_ids") != "device_ids":
            c.i -= 1
            raise c._error("expected 'device_ids=[...]' after the mesh's axes")
        c._expect("=")
        c._expect("[")
        devices = _ints_until(c, "]")
    c._expect(">")
    if not axes:
        if devices is None or len(devices) > 1:
            raise c._error("expected an empty mesh to name its one device: #sdy.mesh<[], device_ids=[N]>")
        return Mesh((), maximal=devices[0] if devices else 0)
    return _checked(c, Mesh(tuple(axes), devices if devices != tuple(range(len(devices or ()))) else None))


def parse_sdy_sharding_body(c: Cursor, meshes: dict[str, str],
                            parse_mesh_text: Callable[[str], Mesh]) -> MeshSharding:
    """Shardy's sharding after its ``<``: ``@mesh, [{"x"}, {}], replicated={"y"}>`` (``>`` read too).
    ``parse_mesh_text(text)``: the :class:`Mesh` of a ``#sdy.mesh<...>`` text."""
    name: str | None = None
    if c._peek() == "@":
        c.i += 1
        name = _name(c, "a mesh name")
        if name not in meshes:
            c.i -= 1
            known = ", ".join("@" + k for k in meshes) or "none given"
            raise c._error(f"expected a mesh the module defines for @{name} (give meshes=comp.partitioning().meshes; "
                           f"known: {known})")
        mesh = parse_mesh_text(meshes[name])
    else:
        if _name(c, "@mesh or mesh<...>") != "mesh":
            c.i -= 1
            raise c._error("expected '@name' or an inline 'mesh<[...]>'")
        c._expect("<")
        mesh = parse_sdy_mesh_body(c)
    c._expect(",")
    if mesh.maximal is not None:
        c._expect("[")
        c._expect("]")
        c._expect(">")
        return MeshSharding(mesh, "maximal", mesh_name=name)
    dims, opens = _dim_list(c, mesh, sdy=True)
    named: dict[str, tuple[AxisRef, ...]] = {}
    while c._peek() == ",":
        c.i += 1
        key = _name(c, "replicated= or unreduced=")
        if key not in ("replicated", "unreduced") or key in named:
            c.i -= 1
            raise c._error(f"expected replicated= or unreduced= (each once), got {key!r}")
        c._expect("=")
        named[key] = _axis_list(c, mesh, sdy=True, allow_open=False)[0]
    c._expect(">")
    return _made(c, MeshSharding(mesh, "tiled", dims, opens, named.get("replicated", ()), named.get("unreduced", ()),
                                 mesh_name=name))


# -- replica groups -------------------------------------------------------------------------------------
def mesh_groups(mesh: Mesh, axes: tuple[AxisRef, ...]) -> tuple[tuple[int, ...], ...]:
    """The device groups of ``replica_groups=<mesh> {axes}``: the devices that differ only along
    ``axes`` form a group, ordered along them (the first axis named the most major)."""
    if mesh.maximal is not None:
        return ((mesh.maximal,),)
    chunks = _chunks(mesh, axes)
    along: list[int] = []
    for r in axes:
        for k in _ref_chunks(mesh, chunks, r):
            if k in along:
                raise ShapeError(f"replica groups {mesh.to_hlo()} {{...}} name axis {r.text(False)} twice")
            along.append(k)
    rest = [k for k in range(len(chunks)) if k not in along]
    size = math.prod(chunks[k][3] for k in along)
    array = mesh.device_array().reshape([c[3] for c in chunks])
    flat = array.transpose(rest + along).reshape(-1, size)
    return tuple(tuple(int(d) for d in g) for g in flat)


def format_groups(groups: Iterable[Iterable[int]]) -> str:
    """Replica groups in HLO's explicit notation: ``{{0,2},{1,3}}``."""
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"
