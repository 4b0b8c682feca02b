"""The :class:`HloSharding` value: constructors, properties, printing, equality and the
checks against devices and shapes (their code in :mod:`xlasdk.sharding._placement`; see
:mod:`xlasdk.sharding` for the notation); and
:class:`OpSharding`, the same sharding in XLA's proto fields, which converts to and from it."""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import numpy as np

from .._proto import _int_list, _ProtoLike
from ..errors import DTypeError, ShapeError
from . import _placement
from ._fields import _MAX_DEVICES, _SIMPLE, _SUBGROUP_ORDER, _int, _ints, _subgroup_kinds
from ._mesh import MeshSharding
from ._parse import ParsedSharding, parse_sharding

# --------------------------------------------------------------------------------------------
# OpSharding: XLA's proto fields (exported by xlasdk.attrs too).


class _ShardingType(enum.Enum):
    """Kind of an ``OpSharding`` (XLA ``OpSharding.Type``)."""

    REPLICATED = 0
    MAXIMAL = 1
    TUPLE = 2
    OTHER = 3
    MANUAL = 4
    UNKNOWN = 5
    UNREDUCED = 6


_ShardingType.__name__, _ShardingType.__qualname__ = "Type", "OpSharding.Type"


class OpSharding(_ProtoLike):
    """How an op's value is split over devices (XLA's ``OpSharding`` proto).

    Attributes
    ----------
    type : OpSharding.Type
        ``REPLICATED`` (every device holds all), ``MAXIMAL`` (one device, the first of
        ``tile_assignment_devices``), ``TUPLE`` (``tuple_shardings`` per element), ``OTHER``
        (tiled by ``tile_assignment_dimensions`` over ``tile_assignment_devices``), ``MANUAL``,
        ``UNKNOWN``, ``UNREDUCED``.
    tile_assignment_dimensions : list of int
        Number of tiles along each dimension (plus trailing subgroup dimensions if
        ``replicate_on_last_tile_dim`` or ``last_tile_dims``).
    tile_assignment_devices : list of int
        Device ids, row-major over ``tile_assignment_dimensions`` (empty with an iota).
    tuple_shardings : list of OpSharding
        Per-element shardings of a tuple.
    replicate_on_last_tile_dim : bool
        The last tile dimension replicates instead of splitting.
    last_tile_dims : list of OpSharding.Type
        Kinds of the trailing subgroup dimensions (``REPLICATED``, ``MANUAL``, ``UNREDUCED``).
    iota_reshape_dims, iota_transpose_perm : list of int
        The devices as an iota: ``arange(n).reshape(iota_reshape_dims).transpose(iota_transpose_perm)``.

    ``to_hlo_string()`` gives XLA's sharding text (``{devices=[2,1]0,1}``), which is what the
    ``mhlo.sharding`` attribute holds in StableHLO; :class:`xlasdk.HloSharding` parses that text
    (``xs.HloSharding.parse(text).to_op_sharding()``).
    """

    Type = _ShardingType
    _FIELDS = (
        "type",
        "tile_assignment_dimensions",
        "tile_assignment_devices",
        "tuple_shardings",
        "replicate_on_last_tile_dim",
        "last_tile_dims",
        "iota_reshape_dims",
        "iota_transpose_perm",
    )

    def __init__(
        self,
        type: _ShardingType | str = _ShardingType.REPLICATED,
        tile_assignment_dimensions: Iterable[int] = (),
        tile_assignment_devices: Iterable[int] = (),
        tuple_shardings: Iterable[OpSharding] = (),
        replicate_on_last_tile_dim: bool = False,
        last_tile_dims: Iterable[_ShardingType | str] = (),
        iota_reshape_dims: Iterable[int] = (),
        iota_transpose_perm: Iterable[int] = (),
    ):
        self.type: Any = _sharding_type(type)
        self.tile_assignment_dimensions = _int_list(
            tile_assignment_dimensions, "tile_assignment_dimensions", 1
        )
        self.tile_assignment_devices = _int_list(tile_assignment_devices, "tile_assignment_devices", 0)
        self.tuple_shardings: list[OpSharding] = list(tuple_shardings)
        self.replicate_on_last_tile_dim = bool(replicate_on_last_tile_dim)
        self.last_tile_dims: list[Any] = [_sharding_type(t) for t in last_tile_dims]
        self.iota_reshape_dims = _int_list(iota_reshape_dims, "iota_reshape_dims", 1)
        self.iota_transpose_perm = _int_list(iota_transpose_perm, "iota_transpose_perm", 0)

    def to_hlo_string(self) -> str:
        """XLA's sharding text: ``{replicated}``, ``{maximal device=0}``, ``{devices=[2,1]0,1}``,
        ``{manual}`` or ``{{...}, {...}}`` for a tuple.

        Raises
        ------
        ShapeError
            If the fields do not describe a valid sharding of their type.
        """
        return HloSharding.from_op_sharding(self).to_hlo()

    def to_mlir(self) -> str:
        """The ``mhlo.sharding`` string attribute: ``"{devices=[2,1]0,1}"``."""
        return HloSharding.from_op_sharding(self).to_mlir()

    def __str__(self) -> str:
        try:
            return self.to_hlo_string()
        except ShapeError:
            return repr(self)


def _sharding_type(value: Any) -> _ShardingType:
    if isinstance(value, _ShardingType):
        return value
    names = ", ".join(_ShardingType.__members__)
    if isinstance(value, str) and value.strip().upper() in _ShardingType.__members__:
        return _ShardingType[value.strip().upper()]
    if isinstance(value, int) and not isinstance(value, bool):
        for m in _ShardingType:
            if m.value == value:
                return m
    raise ShapeError(f"unknown OpSharding.Type {value!r}; expected one of {names}")



# --------------------------------------------------------------------------------------------
# HloSharding: the parsed form.




class HloSharding:
    """A sharding in XLA's HLO notation: replicated, maximal, manual, tiled or a tuple.

    Make one with :meth:`parse` (``HloSharding.parse("{devices=[2,2]0,1,2,3}")``),
    :meth:`replicate`, :meth:`maximal`, :meth:`manual`, :meth:`tile`, :meth:`iota_tile`,
    :meth:`tuple_sharding` or :meth:`of` (any of a string, an ``xs.OpSharding`` or an HloSharding).
    Everywhere xlasdk takes a sharding (``XlaBuilder.set_sharding``, ``with b.sharding(...)``,
    :func:`xlasdk.shard`) it accepts the same three forms.

    The notation is XLA's (``HloSharding::ToString``): see :mod:`xlasdk.sharding`. Device
    numbers are partition numbers of the SPMD program.

    GSPMD notation, Shardy partitioner
    ----------------------------------
    xlasdk writes shardings as GSPMD ``mhlo.sharding`` attributes (this notation), because it is
    the one every format xlasdk reads and writes carries: HLO text and XLA's dumps print
    ``sharding={devices=...}`` (even for programs JAX partitioned with Shardy), HloModule protos
    store ``OpSharding``, and StableHLO files keep the same text in ``mhlo.sharding``; a Shardy
    sharding (``#sdy.sharding<@mesh, ...>``) needs a named mesh that HLO text has no place for.
    Programs with ``num_partitions > 1`` are compiled with XLA's Shardy partitioner
    (``use_shardy_partitioner``, JAX's default in 0.10): jaxlib 0.10.2 imports the GSPMD
    attributes into Shardy, gives the same results as its deprecated GSPMD propagation on every
    program of xlasdk's tests, and also compiles XLA's dumps of JAX programs, whose
    ``xla.sdy.*`` custom calls the GSPMD partitioner refuses.

    Raises
    ------
    ShapeError
        From every constructor, for a sharding that is not well formed (a device list that does
        not fill the tile assignment, a repeated device, a bad iota transpose...).
    """

    __slots__ = ("_kind", "_dims", "_devices", "_iota", "_subgroups", "_device", "_elements", "_shard_group",
                 "_text", "_key", "_array", "_named")

    _kind: str
    _dims: tuple[int, ...]
    _devices: tuple[int, ...] | None
    _iota: tuple[tuple[int, ...], tuple[int, ...]] | None
    _subgroups: tuple[str, ...]
    _device: int
    _elements: tuple[HloSharding, ...]
    _shard_group: tuple[str, int] | None
    _text: str | None
    _key: Any
    _array: np.ndarray[Any, Any] | None
    _named: MeshSharding | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "make an HloSharding with HloSharding.parse(text), .replicate(), .maximal(d), .manual(), "
            ".tile(dims, devices), .iota_tile(...), .tuple_sharding([...]) or .of(value)"
        )

    @classmethod
    def _new(cls, kind: str) -> HloSharding:
        s = object.__new__(cls)
        s._kind = kind
        s._dims = ()
        s._devices = None
        s._iota = None
        s._subgroups = ()
        s._device = -1
        s._elements = ()
        s._shard_group = None
        s._text = None
        s._key = None
        s._array = None
        s._named = None
        return s

    # -- constructors --------------------------------------------------------------------------
    @classmethod
    def replicate(cls) -> HloSharding:
        """``{replicated}``: every device holds the whole value."""
        return _REPLICATED

    @classmethod
    def manual(cls) -> HloSharding:
        """``{manual}``: the value is already per device; the partitioner leaves it alone."""
        return _MANUAL

    @classmethod
    def unknown(cls) -> HloSharding:
        """``{unknown}``: left for sharding propagation to decide."""
        return _UNKNOWN

    @classmethod
    def maximal(cls, device: int) -> HloSharding:
        """``{maximal device=N}``: only device ``device`` holds the value (and computes the op).

        Raises
        ------
        ShapeError
            If ``device`` is not an int >= 0.
        """
        s = cls._new("maximal")
        s._device = _int(device, "maximal device", 0)
        return s

    @classmethod
    def tile(
        cls,
        tile_assignment_dimensions: Sequence[int],
        devices: Sequence[int] | np.ndarray[Any, Any] | None = None,
        *,
        last_tile_dim_replicate: bool = False,
        last_tile_dims: Sequence[str] = (),
    ) -> HloSharding:
        """A tiled sharding: ``{devices=[d0,d1,...]dev0,dev1,...}``.

        Parameters
        ----------
        tile_assignment_dimensions:
            Number of tiles along each array dimension, then (with ``last_tile_dim_replicate``
            or ``last_tile_dims``) the sizes of the trailing subgroup dimensions. ``[2, 2]``
            splits a rank-2 array in 2x2 tiles; ``[2, 1, 2]`` with ``last_tile_dim_replicate``
            splits dimension 0 in two and keeps each half on 2 devices.
        devices:
            The device of each tile, row-major over ``tile_assignment_dimensions`` (a flat list
            or an array of that shape). Default: ``0, 1, 2, ...`` (printed as ``<=[n]``).
        last_tile_dim_replicate:
            The last dimension of the tile assignment replicates (``last_tile_dim_replicate``).
        last_tile_dims:
            Kinds of the trailing subgroup dimensions: ``"replicated"``, ``"manual"`` or
            ``"unreduced"`` (``last_tile_dims={manual, replicated}``).

        Raises
        ------
        ShapeError
            If the device count is not the product of the dimensions, a device repeats, or a
            subgroup kind is unknown.
        """
        dims = _ints(tile_assignment_dimensions, "tile_assignment_dimensions", 1)
        subgroups = _subgroup_kinds(last_tile_dims, last_tile_dim_replicate)
        if devices is None:
            return _tiled(dims, None, (math.prod(dims),) if dims else (), (0,) if dims else (), subgroups, None)
        if isinstance(devices, np.ndarray) and devices.ndim > 1 and tuple(devices.shape) != dims:
            raise ShapeError(
                f"HloSharding.tile: devices has shape {list(devices.shape)}, expected the tile assignment "
                f"dimensions {list(dims)}"
            )
        return _tiled(dims, _ints(devices, "devices", 0), None, None, subgroups, None)

    @classmethod
    def iota_tile(
        cls,
        tile_assignment_dimensions: Sequence[int],
        reshape_dims: Sequence[int] = (),
        transpose_perm: Sequence[int] = (),
        *,
        last_tile_dim_replicate: bool = False,
        last_tile_dims: Sequence[str] = (),
    ) -> HloSharding:
        """A tiled sharding whose devices are an iota, reshaped and transposed:
        ``{devices=[4,2]<=[2,4]T(1,0)}`` (XLA's ``HloSharding::IotaTile``).

        The devices are ``np.arange(n).reshape(reshape_dims).transpose(transpose_perm)`` read
        row-major; ``reshape_dims`` defaults to ``[n]`` and ``transpose_perm`` to the identity.

        Raises
        ------
        ShapeError
            If ``reshape_dims`` does not hold ``n`` devices or ``transpose_perm`` is not a
            permutation of its dimensions.
        """
        dims = _ints(tile_assignment_dimensions, "tile_assignment_dimensions", 1)
        n = math.prod(dims)
        reshape = _ints(reshape_dims, "reshape_dims", 1) or (n,)
        perm = _ints(transpose_perm, "transpose_perm", 0) or tuple(range(len(reshape)))
        subgroups = _subgroup_kinds(last_tile_dims, last_tile_dim_replicate)
        return _tiled(dims, None, reshape, perm, subgroups, None)

    @classmethod
    def tuple_sharding(cls, elements: Iterable[ShardingLike]) -> HloSharding:
        """A tuple sharding ``{{...}, {...}}``: one sharding per element of a tuple value.

        Raises
        ------
        ShapeError
            If an element is itself a tuple sharding (XLA's are flat).
        """
        if isinstance(elements, (str, bytes)) or not isinstance(elements, Iterable):
            raise DTypeError(f"HloSharding.tuple_sharding: expected a sequence of shardings, got {elements!r}")
        elems = tuple(HloSharding.of(e) for e in elements)
        for i, e in enumerate(elems):
            if e._kind == "tuple":
                raise ShapeError(
                    f"HloSharding.tuple_sharding: element {i} is a tuple sharding {e}; tuple shardings are flat"
                )
        s = cls._new("tuple")
        s._elements = elems
        return s

    @classmethod
    def of(cls, value: ShardingLike) -> HloSharding:
        """``value`` as an HloSharding: an HloSharding as is, a string parsed with :meth:`parse`,
        an ``xs.OpSharding`` converted with :meth:`from_op_sharding`.

        Raises
        ------
        DTypeError
            For any other type.
        ShapeError
            For a string that does not parse or fields that do not describe a sharding.
        """
        if isinstance(value, HloSharding):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, OpSharding):
            return cls.from_op_sharding(value)
        raise DTypeError(
            f"expected a sharding: an xs.HloSharding, an xs.OpSharding or HLO sharding text such as "
            f"'{{devices=[2,1]0,1}}', got {type(value).__name__} {value!r}"
        )

    @classmethod
    def parse(cls, text: str, meshes: Mapping[str, str] | Iterable[str] | None = None) -> HloSharding:
        """Parse XLA's sharding notation (what HLO text prints after ``sharding=``).

        Accepts everything ``HloSharding::ToString`` prints: ``{replicated}``, ``{manual}``,
        ``{unknown}``, ``{unreduced}``, ``{maximal device=N}``, ``{devices=[...]...}`` with an
        explicit device list or an iota (``<=[4]``, ``<=[2,2]T(1,0)``), ``last_tile_dim_replicate``,
        ``last_tile_dims={...}``, ``shard_as N`` / ``shard_like N``, and tuples ``{{...}, {...}}``
        (``{}`` is the empty tuple). ``metadata={...}`` is read and dropped, as XLA's printer does.
        Shardings over a named mesh too (:mod:`xlasdk.sharding._mesh`): XLA's mesh notation
        (``{mesh['x'=4], [{'x'}, {}]}``, jaxlib 0.12's dumps) and Shardy's attributes
        (``#sdy.sharding<@mesh, [{"x"}, {}]>``; ``meshes``: the module's meshes, a mapping
        ``{"mesh": '#sdy.mesh<["x"=4]>'}`` or ``comp.partitioning().meshes``). They mean the tile
        assignment :meth:`to_hlo` prints; :attr:`mesh_sharding` keeps them as written.

        Raises
        ------
        ShapeError
            For text that is not a sharding, naming the column and what was expected; for a
            sharding that is not well formed (see :meth:`tile`).
        DTypeError
            If ``text`` is not a str.
        """
        if not isinstance(text, str):
            raise DTypeError(f"HloSharding.parse: expected a str, got {type(text).__name__}")
        try:
            return cls._from_parsed(parse_sharding(text, meshes))
        except ShapeError as e:
            msg = str(e)
            if msg.startswith("HloSharding.parse"):
                raise
            shown = text if len(text) <= 200 else text[:200] + "..."
            raise ShapeError(f"HloSharding.parse: {msg.removeprefix('HloSharding: ')} in {shown!r}") from None

    @classmethod
    def _from_parsed(cls, p: ParsedSharding) -> HloSharding:
        if p.kind == "tuple":
            return cls.tuple_sharding([cls._from_parsed(e) for e in p.elements])
        if p.kind == "maximal":
            s = cls.maximal(p.device)
        elif p.kind == "tiled" and p.iota is not None:
            s = _tiled(p.dims, None, p.iota[0], p.iota[1], p.subgroups, p.shard_group)
        elif p.kind == "tiled":
            s = _tiled(p.dims, p.devices, None, None, p.subgroups, p.shard_group)
        else:
            s = _SIMPLE_SHARDINGS[p.kind]
        if p.named is None:
            return s
        named = cls._new(s._kind)  # the same sharding, which remembers the mesh it was written over
        for slot in HloSharding.__slots__:
            setattr(named, slot, getattr(s, slot))
        named._named = p.named
        return named

    @classmethod
    def from_op_sharding(cls, op: OpSharding) -> HloSharding:
        """The sharding an ``xs.OpSharding`` (XLA's ``OpSharding`` proto fields) describes.

        Raises
        ------
        ShapeError
            If the fields do not describe a valid sharding of their type.
        """
        if not isinstance(op, OpSharding):
            raise DTypeError(f"HloSharding.from_op_sharding: expected an xs.OpSharding, got {type(op).__name__}")
        kind = _sharding_type(op.type).name.lower()
        if kind in _SIMPLE:
            return _SIMPLE_SHARDINGS[kind]
        devices = _ints(op.tile_assignment_devices, "OpSharding.tile_assignment_devices", 0)
        if kind == "maximal":
            if not devices:
                raise ShapeError("OpSharding MAXIMAL needs the device in tile_assignment_devices")
            return cls.maximal(devices[0])
        if kind == "tuple":
            for i, e in enumerate(op.tuple_shardings):
                if not isinstance(e, OpSharding):
                    raise ShapeError(f"OpSharding.tuple_shardings[{i}] must be an OpSharding, got {type(e).__name__}")
            return cls.tuple_sharding([cls.from_op_sharding(e) for e in op.tuple_shardings])
        dims = _ints(op.tile_assignment_dimensions, "OpSharding.tile_assignment_dimensions", 1)
        if not dims:
            raise ShapeError("OpSharding OTHER needs tile_assignment_dimensions")
        subgroup_types = [
            _sharding_type(t).name.lower() for t in getattr(op, "last_tile_dims", ()) or ()
        ]
        reshape = _ints(getattr(op, "iota_reshape_dims", ()) or (), "OpSharding.iota_reshape_dims", 1)
        if reshape and not devices:
            perm = _ints(getattr(op, "iota_transpose_perm", ()) or (), "OpSharding.iota_transpose_perm", 0)
            return cls.iota_tile(dims, reshape, perm, last_tile_dim_replicate=bool(op.replicate_on_last_tile_dim),
                                 last_tile_dims=subgroup_types)
        if math.prod(dims) != len(devices) or len(set(devices)) != len(devices):
            raise ShapeError(
                f"OpSharding tile_assignment_devices {list(devices)} must be {math.prod(dims)} distinct devices "
                f"for tile_assignment_dimensions {list(dims)}"
            )
        return cls.tile(dims, devices, last_tile_dim_replicate=bool(op.replicate_on_last_tile_dim),
                        last_tile_dims=subgroup_types)

    # -- what it is ----------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        """``"replicated"``, ``"maximal"``, ``"manual"``, ``"unknown"``, ``"unreduced"``,
        ``"tiled"`` or ``"tuple"``."""
        return self._kind

    @property
    def is_replicated(self) -> bool:
        return self._kind == "replicated"

    @property
    def is_maximal(self) -> bool:
        return self._kind == "maximal"

    @property
    def is_manual(self) -> bool:
        return self._kind == "manual"

    @property
    def is_tiled(self) -> bool:
        return self._kind == "tiled"

    @property
    def is_tuple(self) -> bool:
        return self._kind == "tuple"

    @property
    def device(self) -> int:
        """The device of a maximal sharding.

        Raises
        ------
        ShapeError
            For other kinds.
        """
        if self._kind != "maximal":
            raise ShapeError(f"HloSharding.device: {self} is not a maximal sharding")
        return self._device

    @property
    def mesh_sharding(self) -> MeshSharding | None:
        """The sharding as it was written over a named mesh (XLA's ``{mesh[...], ...}`` or Shardy's
        ``#sdy.sharding<...>``), which ``.to_hlo()`` / ``.to_sdy()`` print back; None for the
        other notations (and for built shardings)."""
        return self._named

    @property
    def tuple_elements(self) -> tuple[HloSharding, ...]:
        """The element shardings of a tuple sharding (empty for other kinds)."""
        return self._elements

    @property
    def tile_assignment_dimensions(self) -> tuple[int, ...]:
        """Dimensions of the tile assignment, subgroup dimensions included (``()`` if not tiled)."""
        return self._dims

    @property
    def tile_assignment_devices(self) -> tuple[int, ...]:
        """Every device of the tile assignment, row-major (the iota expanded)."""
        if self._kind == "maximal":
            return (self._device,)
        if self._kind != "tiled":
            return ()
        return tuple(int(d) for d in self._assignment().reshape(-1))

    @property
    def replicate_on_last_tile_dim(self) -> bool:
        """The tile assignment's last dimension replicates (``last_tile_dim_replicate``)."""
        return self._subgroups == ("replicated",)

    @property
    def last_tile_dims(self) -> tuple[str, ...]:
        """Kinds of the trailing subgroup dimensions (``("replicated",)`` for
        ``last_tile_dim_replicate``; empty when every dimension splits the array)."""
        return self._subgroups

    @property
    def tiled_data_rank(self) -> int:
        """Number of tile assignment dimensions that split the array (its rank, for a tiled
        sharding; 0 otherwise)."""
        return len(self._dims) - len(self._subgroups) if self._kind == "tiled" else 0

    @property
    def tile_counts(self) -> tuple[int, ...]:
        """Number of tiles along each array dimension (``()`` if not tiled)."""
        return self._dims[: self.tiled_data_rank]

    @property
    def num_devices(self) -> int:
        """Devices named by the sharding: the tile assignment's size, 1 for maximal, 0 for
        replicated, manual and unknown, the most of any element for a tuple."""
        if self._kind == "tiled":
            return math.prod(self._dims)
        if self._kind == "maximal":
            return 1
        if self._kind == "tuple":
            return max((e.num_devices for e in self._elements), default=0)
        return 0

    def _assignment(self) -> np.ndarray[Any, Any]:
        """The tile assignment as an int64 array of shape :attr:`tile_assignment_dimensions`."""
        a = self._array
        if a is None:
            if self._devices is not None:
                a = np.asarray(self._devices, dtype=np.int64).reshape(self._dims)
            else:
                assert self._iota is not None
                reshape, perm = self._iota
                a = np.arange(math.prod(reshape), dtype=np.int64).reshape(reshape).transpose(perm).reshape(self._dims)
            a.setflags(write=False)
            self._array = a
        return a

    # -- text ----------------------------------------------------------------------------------
    def to_hlo(self) -> str:
        """XLA's notation, as HLO text prints it after ``sharding=`` (``{devices=[2,1]0,1}``)."""
        t = self._text
        if t is None:
            t = self._text = self._print()
        return t

    def _print(self) -> str:
        k = self._kind
        if k in _SIMPLE:
            return "{" + k + "}"
        if k == "maximal":
            return f"{{maximal device={self._device}}}"
        if k == "tuple":
            return "{" + ", ".join(e.to_hlo() for e in self._elements) + "}"
        text = "{devices=[" + ",".join(map(str, self._dims)) + "]"
        if self._devices is not None:
            text += ",".join(map(str, self._devices))
        else:
            assert self._iota is not None
            reshape, perm = self._iota
            if perm == tuple(range(len(perm))):
                text += f"<=[{math.prod(reshape)}]"
            else:
                text += "<=[" + ",".join(map(str, reshape)) + "]T(" + ",".join(map(str, perm)) + ")"
        if self._subgroups == ("replicated",):
            text += " last_tile_dim_replicate"
        elif self._subgroups:
            text += " last_tile_dims={" + ", ".join(self._subgroups) + "}"
        if self._shard_group is not None:
            text += f" shard_{self._shard_group[0]} {self._shard_group[1]}"
        return text + "}"

    def to_mlir(self) -> str:
        """The ``mhlo.sharding`` attribute value: the notation as an MLIR string literal
        (``"{devices=[2,1]0,1}"``, quotes included)."""
        return '"' + self.to_hlo().replace("\\", "\\\\").replace('"', '\\"') + '"'

    def to_op_sharding(self) -> OpSharding:
        """The sharding as an ``xs.OpSharding`` (XLA's proto fields; an iota stays an iota in
        ``iota_reshape_dims`` / ``iota_transpose_perm``, as XLA stores it)."""
        k = self._kind
        if k == "tuple":
            return OpSharding("TUPLE", tuple_shardings=[e.to_op_sharding() for e in self._elements])
        if k == "maximal":
            return OpSharding("MAXIMAL", tile_assignment_dimensions=[1], tile_assignment_devices=[self._device])
        if k != "tiled":
            return OpSharding(k.upper())
        op = OpSharding("OTHER", tile_assignment_dimensions=list(self._dims))
        if self._devices is not None:
            op.tile_assignment_devices = list(self._devices)
        else:
            assert self._iota is not None
            op.iota_reshape_dims = list(self._iota[0])
            op.iota_transpose_perm = list(self._iota[1])
        if self._subgroups == ("replicated",):
            op.replicate_on_last_tile_dim = True
        else:
            op.last_tile_dims = [OpSharding.Type[s.upper()] for s in self._subgroups]
        return op

    def __str__(self) -> str:
        return self.to_hlo()

    def __repr__(self) -> str:
        return f"HloSharding({self.to_hlo()!r})"

    # -- equality ------------------------------------------------------------------------------
    def _semantic_key(self) -> Any:
        key = self._key
        if key is None:
            if self._kind == "tiled":
                a = self._assignment()
                if "replicated" in self._subgroups:  # the order within a replication group is free
                    a = np.sort(a, axis=self.tiled_data_rank + self._subgroups.index("replicated"))
                key = ("tiled", self._dims, self._subgroups, tuple(int(d) for d in a.reshape(-1)))
            elif self._kind == "maximal":
                key = ("maximal", self._device)
            elif self._kind == "tuple":
                key = ("tuple", tuple(e._semantic_key() for e in self._elements))
            else:
                key = (self._kind,)
            self._key = key
        return key

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = HloSharding.parse(other)
            except ShapeError:
                return False
        if not isinstance(other, HloSharding):
            return NotImplemented
        return self is other or self._semantic_key() == other._semantic_key()

    def __hash__(self) -> int:
        return hash(self._semantic_key())

    # -- checks against devices and shapes (xlasdk/sharding/_placement.py) -------------------------
    validate = _placement.validate
    tile_shape = _placement.tile_shape
    device_tiles = _placement.device_tiles
    shard_slices = _placement.shard_slices


def _tiled(
    dims: tuple[int, ...],
    devices: tuple[int, ...] | None,
    reshape: tuple[int, ...] | None,
    perm: tuple[int, ...] | None,
    subgroups: tuple[str, ...],
    shard_group: tuple[str, int] | None,
) -> HloSharding:
    """A checked, canonical tiled sharding (as XLA's constructors make it)."""
    if not dims:
        raise ShapeError("HloSharding: a tiled sharding needs at least one tile assignment dimension")
    n = math.prod(dims)
    if n > _MAX_DEVICES:
        raise ShapeError(f"HloSharding: the tile assignment {list(dims)} names {n} devices, more than {_MAX_DEVICES}")
    if len(subgroups) > len(dims):
        raise ShapeError(
            f"HloSharding: {len(subgroups)} subgroup dimensions ({', '.join(subgroups)}) but the tile assignment "
            f"{list(dims)} has only {len(dims)} dimensions"
        )
    if devices is not None:
        if len(devices) != n:
            raise ShapeError(
                f"HloSharding: the tile assignment {list(dims)} needs {n} devices, got {len(devices)} "
                f"({','.join(map(str, devices[:16]))}{',...' if len(devices) > 16 else ''})"
            )
        if len(set(devices)) != n:
            seen: set[int] = set()
            dup = next(d for d in devices if d in seen or seen.add(d))  # type: ignore[func-returns-value]
            raise ShapeError(f"HloSharding: device {dup} appears twice in the tile assignment {list(devices)}")
    else:
        assert reshape is not None and perm is not None
        if math.prod(reshape) != n:
            raise ShapeError(
                f"HloSharding: iota <=[{','.join(map(str, reshape))}] holds {math.prod(reshape)} devices, but the "
                f"tile assignment {list(dims)} needs {n}"
            )
        if sorted(perm) != list(range(len(reshape))):
            raise ShapeError(
                f"HloSharding: T({','.join(map(str, perm))}) is not a permutation of the {len(reshape)} iota "
                f"dimensions <=[{','.join(map(str, reshape))}]"
            )
    s = HloSharding._new("tiled")
    s._dims, s._devices, s._subgroups, s._shard_group = dims, devices, subgroups, shard_group
    s._iota = None if devices is not None else (reshape, perm)  # type: ignore[assignment]
    return _canonical(s)


def _canonical(s: HloSharding) -> HloSharding:
    """XLA's normal form: subgroup dimensions of size 1 dropped, subgroups sorted and merged
    by kind, and a sharding with one tile (or only replication) made ``{replicated}`` /
    ``{manual}``."""
    dims, subgroups = s._dims, s._subgroups
    rank = len(dims) - len(subgroups)
    sizes = dims[rank:]
    data = dims[:rank]
    if not subgroups and math.prod(dims) == 1:
        return _REPLICATED
    if not subgroups:
        return s
    keep = [i for i, n in enumerate(sizes) if n > 1]
    order = sorted(keep, key=lambda i: _SUBGROUP_ORDER[subgroups[i]])
    merged: list[tuple[str, int]] = []
    for i in order:
        if merged and merged[-1][0] == subgroups[i]:
            merged[-1] = (subgroups[i], merged[-1][1] * sizes[i])
        else:
            merged.append((subgroups[i], sizes[i]))
    kinds = tuple(k for k, _ in merged)
    if all(d == 1 for d in data) and len(set(kinds)) <= 1 and s._shard_group is None:
        if not kinds or kinds == ("replicated",):
            return _REPLICATED
        if kinds == ("manual",):
            return _MANUAL
    if len(keep) == len(sizes) and order == keep and len(merged) == len(keep):
        return s  # already canonical: keep the user's device list or iota
    a = s._assignment()
    kept = tuple(sizes[i] for i in keep)
    a = a.reshape(data + kept).transpose(list(range(rank)) + [rank + keep.index(i) for i in order])
    new_dims = data + tuple(n for _, n in merged)
    if not merged:
        new_dims = data
    if math.prod(new_dims) == 1:
        return _REPLICATED
    out = HloSharding._new("tiled")
    out._dims = new_dims
    out._devices = tuple(int(d) for d in a.reshape(-1))
    out._subgroups = kinds
    out._shard_group = s._shard_group
    return out


_REPLICATED: Final = HloSharding._new("replicated")
_MANUAL: Final = HloSharding._new("manual")
_UNKNOWN: Final = HloSharding._new("unknown")
_UNREDUCED: Final = HloSharding._new("unreduced")
_SIMPLE_SHARDINGS: Final = {"replicated": _REPLICATED, "manual": _MANUAL, "unknown": _UNKNOWN,
                             "unreduced": _UNREDUCED}


#: What xlasdk takes wherever a sharding goes (see :meth:`HloSharding.of`): an HloSharding, an
#: ``xs.OpSharding`` or XLA's notation as a string (``"{devices=[2,1]0,1}"``).
ShardingLike = HloSharding | OpSharding | str
