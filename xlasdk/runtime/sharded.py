"""SPMD execution: ``ShardedArray``, ``shard`` and ``Executable.execute_sharded``.

A program compiled with ``xs.CompileOptions(num_partitions=P)`` (and ``num_replicas=R``) runs
on ``R * P`` devices at once. Each parameter and result has an :class:`~xlasdk.HloSharding`
(what the program was built with, after XLA's sharding propagation) saying which piece of the
global array each device holds. :class:`ShardedArray` is such a global array: one
:class:`~xlasdk.DeviceArray` per device plus the sharding, and ``to_numpy()`` puts the pieces
back together::

    cl = xs.client("cpu", num_devices=4)
    exe = xs.compile(comp, cl.devices()[0], options=xs.CompileOptions(num_partitions=4))
    out = exe.execute_sharded([x_numpy, w_numpy])        # numpy in: split by the sharding
    out.shards                                           # 4 DeviceArrays, one per device
    out.to_numpy()                                       # the global result
    x = xs.shard(x_numpy, "{devices=[4,1]<=[4]}", cl.devices())   # device-resident input
    out = exe.execute_sharded([x, w])

Devices are ordered as :attr:`Executable.devices`: replica-major (``r0p0, r0p1, ...,
r1p0, ...``); a sharding's device numbers are partition numbers, so in replica ``r`` device
``p`` of the sharding is ``devices[r * P + p]``, and every replica holds the whole array.

Under ``xs.distributed`` the devices span processes: every process calls ``execute_sharded``
with the same global arrays (or its own devices' shards) and gets its own devices' shards;
``to_numpy()`` works where this process holds every tile (a replicated result, for instance).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._jaxlib import pjrt
from ..errors import DTypeError, ShapeError, XlaRuntimeError
from ..sharding import HloSharding, ShardingLike
from ._device_array import DeviceArray, _aval
from .array import _native, _to_host
from .device import Client, Device, _resolve_device

if TYPE_CHECKING:
    from ._arguments import _ParamSpec
    from ._executable import Executable

__all__ = ["ShardedArray", "shard", "execute_sharded"]


# -- labels: the GSPMDSharding jaxlib keeps beside a global array ----------------------------------
def _label(sharding: HloSharding, num_partitions: int, num_replicas: int) -> str | None:
    """The sharding over all ``R * P`` devices (positions in the replica-major device list) in
    XLA's notation, or None to label the array replicated.

    jaxlib uses the label only to describe the pieces; execution takes the buffers in device
    order whatever it says, and xlasdk keeps the shapes itself.
    """
    if not sharding.is_tiled:
        return None
    if num_replicas == 1:
        return sharding.to_hlo()
    subgroups = sharding.last_tile_dims
    if subgroups not in ((), ("replicated",)):
        return None
    a = sharding._assignment()
    if not subgroups:
        a = a[..., None]
    copies = [a + r * num_partitions for r in range(num_replicas)]
    full = np.concatenate(copies, axis=-1)
    dims = ",".join(map(str, full.shape))
    return f"{{devices=[{dims}]{','.join(map(str, full.reshape(-1).tolist()))} last_tile_dim_replicate}}"


class _Layout:
    """How one global array of ``dims``/``dtype`` lies on ``devices`` under ``sharding``."""

    __slots__ = ("dims", "dtype", "sharding", "devices", "jdevices", "num_replicas", "num_partitions",
                 "shard_dims", "aval", "shard_aval", "gspmd", "local", "local_devices", "_slices")

    def __init__(
        self,
        dims: tuple[int, ...],
        dtype: np.dtype[Any],
        sharding: HloSharding,
        devices: tuple[Device, ...],
        num_replicas: int,
    ) -> None:
        n = len(devices)
        if num_replicas < 1 or n % num_replicas:
            raise ShapeError(f"{n} devices do not split into {num_replicas} replicas")
        p = n // num_replicas
        if sharding.is_tuple:
            raise ShapeError(f"an array cannot have the tuple sharding {sharding}")
        sharding.validate(p, dims)
        self.dims = dims
        self.dtype = dtype
        self.sharding = sharding
        self.devices = devices
        self.jdevices = tuple(d._d for d in devices)
        self.num_replicas = num_replicas
        self.num_partitions = p
        self.shard_dims = sharding.tile_shape(dims)
        self.aval = _aval(dims, dtype)
        self.shard_aval = _aval(self.shard_dims, dtype)
        self.gspmd = pjrt.gspmd_sharding(self.jdevices, _label(sharding, p, num_replicas))
        # Positions of this process's devices (all of them, except under xs.distributed).
        me = devices[0].client.process_index
        self.local = tuple(k for k, d in enumerate(devices) if d.process_index == me)
        self.local_devices = tuple(devices[k] for k in self.local)
        self._slices: list[tuple[slice, ...] | None] | None = None

    def same(self, other: _Layout) -> bool:
        return self is other or (
            self.dims == other.dims and self.dtype == other.dtype and self.num_replicas == other.num_replicas
            and self.devices == other.devices and self.sharding == other.sharding
        )

    def pieces(self, host: np.ndarray[Any, Any]) -> list[np.ndarray[Any, Any]]:
        """The piece of the global ``host`` array each device holds (padded to the tile shape
        where a dimension does not divide evenly, as XLA expects)."""
        if self.sharding.is_manual or self.sharding.kind == "unreduced":
            raise ShapeError(
                f"a {self.sharding} array has no global value to split: pass one value per device"
            )
        if not self.sharding.is_tiled:  # replicated, maximal, unknown: every device gets it all
            return [host] * len(self.devices)
        if self._slices is None:
            self._slices = self.sharding.shard_slices(self.dims, self.num_partitions)
        per_partition = []
        for sl in self._slices:
            assert sl is not None
            piece = host[sl]
            if piece.shape != self.shard_dims:
                pad = [(0, t - s) for t, s in zip(self.shard_dims, piece.shape, strict=True)]
                piece = np.pad(piece, pad)
            per_partition.append(np.ascontiguousarray(piece))
        return per_partition * self.num_replicas

    def needed(self) -> list[int]:
        """Positions (in :attr:`local`'s order of preference) whose pieces make the global array:
        one device of this process per tile; raises when this process lacks a tile."""
        s = self.sharding
        if s.is_manual or s.kind == "unreduced":
            raise XlaRuntimeError(
                f"a {s} array has no global value: read its per-device values from .shards"
            )
        p = self.num_partitions
        if s.is_maximal:
            want = [k for k in self.local if k % p == s.device][:1]
            if not want:
                raise XlaRuntimeError(f"the {s} array lives on a device of another process")
            return want
        if not s.is_tiled:
            return [self.local[0]]
        if self._slices is None:
            self._slices = s.shard_slices(self.dims, p)
        picked: dict[tuple[int, ...], int] = {}
        for k in self.local:
            sl = self._slices[k % p]
            assert sl is not None
            picked.setdefault(tuple(x.start for x in sl), k)
        if len(picked) < len({tuple(x.start for x in sl) for sl in self._slices if sl is not None}):
            raise XlaRuntimeError(
                f"this process holds {len(picked)} of the tiles of the {s} array; the others are on other "
                "processes' devices: read .shards, or give the program a replicated output"
            )
        return sorted(picked.values())

    def assemble(self, pieces: dict[int, np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        """The global array from the pieces of the :meth:`needed` positions."""
        s = self.sharding
        if not s.is_tiled:
            return next(iter(pieces.values()))
        assert self._slices is not None
        out = np.empty(self.dims, self.dtype)
        for k, piece in pieces.items():
            sl = self._slices[k % self.num_partitions]
            assert sl is not None
            out[sl] = piece[tuple(slice(0, x.stop - x.start) for x in sl)]
        return out


# -- ShardedArray -----------------------------------------------------------------------------
class ShardedArray:
    """A global array split over several devices: one :class:`~xlasdk.DeviceArray` per device
    and the :class:`~xlasdk.HloSharding` that says which piece each holds.

    Made by :func:`shard`, :meth:`from_shards` and :meth:`Executable.execute_sharded
    <xlasdk.Executable.execute_sharded>`. Passing it back to ``execute_sharded`` of a program
    with the same devices and parameter sharding uses its device buffers as they are (no copy).

    Attributes
    ----------
    shape, dtype:
        Of the global array.
    sharding:
        The sharding; its device numbers are partitions (positions within one replica).
    devices:
        Every device of the array, replica-major (``num_replicas`` copies of the
        ``num_partitions`` devices); under ``xs.distributed`` also other processes' devices, of
        which :attr:`shards` holds none.
    """

    __slots__ = ("_layout", "_global", "_shards", "_host", "__weakref__")

    _layout: _Layout
    _global: Any
    _shards: tuple[DeviceArray, ...] | None
    _host: np.ndarray[Any, Any] | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("ShardedArray objects are made by xs.shard(...), ShardedArray.from_shards(...) or "
                        "Executable.execute_sharded(...)")

    @classmethod
    def _make(cls, layout: _Layout, global_array: Any, shards: tuple[DeviceArray, ...] | None) -> ShardedArray:
        a = object.__new__(cls)
        a._layout = layout
        a._global = global_array
        a._shards = shards
        a._host = None
        return a

    @classmethod
    def from_shards(
        cls,
        shards: Sequence[Any],
        sharding: ShardingLike,
        shape: Sequence[int] | None = None,
        *,
        num_replicas: int = 1,
    ) -> ShardedArray:
        """A ShardedArray from one value per device (DeviceArrays stay where they are; numpy
        arrays go to the device of the DeviceArray at the same position, or to ``shards[k]``'s
        device when all are DeviceArrays).

        Parameters
        ----------
        shards:
            ``DeviceArray`` values, one per device, replica-major; each of the sharding's tile
            shape.
        sharding:
            An ``xs.HloSharding``, ``xs.OpSharding`` or XLA's notation.
        shape:
            The global shape; default: the tile shape times the tile counts (give it for a
            dimension XLA padded).
        num_replicas:
            How many copies of the partitions the devices hold.

        Raises
        ------
        ShapeError
            For shards of different shapes, a count that does not fit the sharding, or a
            sharding that does not fit the devices.
        DTypeError
            For shards that are not DeviceArrays, or of different dtypes.
        """
        if isinstance(shards, (str, bytes)) or not isinstance(shards, Sequence) or not shards:
            raise ShapeError(f"from_shards: expected a non-empty list of DeviceArrays, got {shards!r}")
        for k, s in enumerate(shards):
            if not isinstance(s, DeviceArray):
                raise DTypeError(f"from_shards: shard {k} is a {type(s).__name__}, expected a DeviceArray")
            s._live()
        sh = HloSharding.of(sharding)
        first = shards[0]
        for k, s in enumerate(shards):
            if s.shape != first.shape or s.dtype != first.dtype:
                raise ShapeError(
                    f"from_shards: shard {k} is {s.xla_shape()} but shard 0 is {first.xla_shape()}; every "
                    "shard has the tile shape"
                )
        if shape is None:
            counts = sh.tile_counts if sh.is_tiled else (1,) * first.ndim
            if len(counts) != first.ndim:
                raise ShapeError(f"from_shards: sharding {sh} splits {len(counts)} dimensions, but the shards "
                                 f"have rank {first.ndim}")
            dims = tuple(c * d for c, d in zip(counts, first.shape, strict=True))
        else:
            dims = tuple(int(d) for d in shape)
        layout = _Layout(dims, first.dtype, sh, tuple(s.device for s in shards), num_replicas)
        if layout.shard_dims != first.shape:
            raise ShapeError(
                f"from_shards: sharding {sh} of shape {list(dims)} gives pieces of shape {list(layout.shard_dims)}, "
                f"but the shards are {list(first.shape)}"
            )
        return cls._make(layout, None, tuple(shards))

    # -- metadata ------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Dimensions of the global array."""
        return self._layout.dims

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._layout.dtype

    @property
    def ndim(self) -> int:
        return len(self._layout.dims)

    @property
    def size(self) -> int:
        n = 1
        for d in self._layout.dims:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        """Logical size of the global array in bytes."""
        return self.size * self._layout.dtype.itemsize

    @property
    def sharding(self) -> HloSharding:
        """How the array is split over one replica's devices."""
        return self._layout.sharding

    @property
    def devices(self) -> tuple[Device, ...]:
        """The device of each shard, replica-major."""
        return self._layout.devices

    @property
    def num_replicas(self) -> int:
        return self._layout.num_replicas

    @property
    def num_partitions(self) -> int:
        return self._layout.num_partitions

    @property
    def shard_shape(self) -> tuple[int, ...]:
        """Dimensions of each device's piece (the sharding's tile shape)."""
        return self._layout.shard_dims

    @property
    def local_devices(self) -> tuple[Device, ...]:
        """The devices of :attr:`devices` that this process addresses (all of them in a single
        process), in the same order: the devices of :attr:`shards`."""
        return self._layout.local_devices

    @property
    def shards(self) -> tuple[DeviceArray, ...]:
        """One :class:`~xlasdk.DeviceArray` per device of this process, in :attr:`devices` order
        (in a single process: one per device)."""
        s = self._shards
        if s is None:
            if self._global is None:
                raise XlaRuntimeError(f"{self._describe()} has been deleted")
            lay = self._layout
            bufs = pjrt.global_shards(self._global)
            wrap = DeviceArray._wrap
            s = self._shards = tuple(
                wrap(b, lay.shard_dims, lay.dtype, d) for b, d in zip(bufs, lay.local_devices, strict=True)
            )
        return s

    def _global_array(self) -> Any:
        """The jaxlib global array (made from the shards on first use)."""
        g = self._global
        if g is None:
            shards = self._shards
            if shards is None or any(x._arr is None for x in shards):
                raise XlaRuntimeError(f"{self._describe()} has been deleted")
            lay = self._layout
            g = self._global = pjrt.assemble_global(lay.aval, lay.gspmd, [x._arr for x in shards])
        return g

    def _describe(self) -> str:
        return (f"ShardedArray {self.dtype}{list(self.shape)} with sharding {self.sharding} over "
                f"{len(self.devices)} devices")

    # -- host access and lifetime ----------------------------------------------------------------
    def to_numpy(self) -> np.ndarray[Any, Any]:
        """The global array on the host, assembled from one shard per tile (the first replica's,
        in a single process; waits for them). Read-only and cached, like
        :meth:`DeviceArray.to_numpy`.

        Raises
        ------
        XlaRuntimeError
            If the array was deleted, its computation failed, its sharding is ``{manual}`` (the
            value exists only per device: read :attr:`shards`), or, under ``xs.distributed``,
            some tiles are only on other processes' devices.
        """
        v = self._host
        if v is None:
            lay = self._layout
            shards = self.shards
            position = {k: i for i, k in enumerate(lay.local)}
            v = lay.assemble({k: shards[position[k]].to_numpy() for k in lay.needed()})
            if v.flags.writeable:
                v.setflags(write=False)
            self._host = v
        return v

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        v = self.to_numpy()
        if dtype is not None and np.dtype(dtype) != v.dtype:
            if copy is False:
                raise ValueError(f"cannot convert {self._describe()} to {np.dtype(dtype)} without a copy")
            return v.astype(dtype)
        return v.copy() if copy else v

    def block_until_ready(self) -> ShardedArray:
        """Wait until every shard is computed; return ``self``.

        Raises
        ------
        XlaRuntimeError
            If the array was deleted or the computation producing it failed.
        """
        g = self._global
        if g is not None and self._shards is None:
            pjrt.array_block(g)  # one call for every shard
            return self
        for x in self.shards:
            x.block_until_ready()
        return self

    def delete(self) -> None:
        """Free every shard's device buffer now (deleting twice is allowed)."""
        shards = self._shards
        if shards is None and self._global is not None:
            shards = self.shards
        self._global = None
        self._host = None
        for x in shards or ():
            x.delete()

    def is_deleted(self) -> bool:
        """Whether :meth:`delete` was called (or a shard was deleted)."""
        if self._shards is not None:
            return any(x.is_deleted() for x in self._shards)
        return self._global is None

    def __repr__(self) -> str:
        return f"ShardedArray(shape={self.shape}, dtype={self.dtype}, sharding={self.sharding}, " \
               f"devices=[{', '.join(str(d) for d in self.devices)}])"


# -- making one -------------------------------------------------------------------------------
def _device_list(devices: Any, what: str) -> tuple[Device, ...]:
    if isinstance(devices, Client):
        return tuple(devices.devices())
    if isinstance(devices, (str, bytes)) or not isinstance(devices, Sequence) or not devices:
        raise ShapeError(f"{what}: devices must be a non-empty list of devices (or an xs.Client), got {devices!r}")
    out = tuple(_resolve_device(d) for d in devices)
    if len(set(out)) != len(out):
        raise ShapeError(f"{what}: a device appears twice in {[str(d) for d in out]}")
    if len({d.client for d in out}) != 1:
        raise ShapeError(f"{what}: the devices belong to different clients")
    return out


def _place(layout: _Layout, host: np.ndarray[Any, Any]) -> ShardedArray:
    """Copy the pieces of ``host`` to their devices: a ShardedArray."""
    pieces = layout.pieces(host)
    put = pjrt.put
    aval = layout.shard_aval
    devs = layout.devices
    bufs = [put(pieces[k], aval, devs[k]._sharding, devs[k]._d) for k in layout.local]
    g = pjrt.assemble_global(layout.aval, layout.gspmd, bufs)
    return ShardedArray._make(layout, g, None)


def shard(
    value: Any, sharding: ShardingLike, devices: Sequence[Device | str] | Client, *, num_replicas: int = 1
) -> ShardedArray:
    """Split ``value`` by ``sharding`` and copy each piece to its device.

    Parameters
    ----------
    value:
        The global array: a numpy array (any XLA element type), a DeviceArray (read back to
        the host first), a Python or numpy scalar, or anything with ``__array__``.
    sharding:
        An ``xs.HloSharding``, ``xs.OpSharding`` or XLA's notation
        (``"{devices=[2,2]0,1,2,3}"``, ``"{replicated}"``...). Device ``p`` of the sharding is
        ``devices[p]``.
    devices:
        The devices, ``num_replicas * P`` of them (replica-major), or an ``xs.Client`` for all
        of its devices.
    num_replicas:
        Copies of the whole array (each over ``len(devices) // num_replicas`` partitions).

    Returns
    -------
    ShardedArray
        Each tiled dimension that does not divide evenly is padded with zeros in the last
        tiles, as XLA expects.

    Raises
    ------
    ShapeError
        If the sharding does not fit the number of devices (a device number past the last
        device, a tile assignment that does not name every device) or the array's rank, or is
        ``{manual}`` (which has no global array: use :meth:`ShardedArray.from_shards`).
    DTypeError
        For values of no XLA element type.

    Maps to ``batched_device_put`` per device and a jaxlib ``ArrayImpl`` with a ``GSPMDSharding``.
    """
    devs = _device_list(devices, "shard")
    sh = HloSharding.of(sharding)
    if isinstance(value, DeviceArray):
        host = value.to_numpy()
    elif isinstance(value, ShardedArray):
        host = value.to_numpy()
    else:
        host = _to_host(value, "shard")
    if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
        raise ShapeError(f"shard: num_replicas must be an int >= 1, got {num_replicas!r}")
    if len(devs) % num_replicas:
        raise ShapeError(f"shard: {len(devs)} devices do not split into {num_replicas} replicas")
    try:
        layout = _Layout(tuple(host.shape), host.dtype, sh, devs, num_replicas)
    except ShapeError as e:
        raise ShapeError(f"shard: {e}") from None
    return _place(layout, host)


# -- Executable.execute_sharded -------------------------------------------------------------------
class _Spmd:
    """Per-executable data for ``execute_sharded``, built on its first call."""

    __slots__ = ("name", "devices", "num_replicas", "params", "outputs", "handlers", "is_tuple", "nparams",
                 "plan")

    def __init__(self, exe: Executable) -> None:
        self.name = exe._name
        self.devices = exe._devices
        self.num_replicas = r = exe._num_replicas
        plan = self.plan = exe._plan
        if plan.unsupported_output is not None:
            raise plan.output_error()
        in_texts, out_texts = pjrt.executable_shardings(exe._exe)
        self.params: list[tuple[_ParamSpec, _ParamSpec, _Layout]] = []
        from ._arguments import _ParamSpec

        for i, spec in enumerate(plan.params):
            if not spec.supported:
                raise ShapeError(f"{self.name}: parameter {i} ({spec.name!r}) has shape {spec.shape}; only array "
                                 "parameters can be passed")
            sh = HloSharding.parse(in_texts[i]) if in_texts else HloSharding.replicate()
            layout = _Layout(spec.dims, spec.dtype, sh, self.devices, r)
            shard_shape = spec.shape if layout.shard_dims == spec.dims else type(spec.shape).array_shape(
                spec.dtype, layout.shard_dims)
            self.params.append((spec, _ParamSpec(spec.index, spec.name, shard_shape, self.name), layout))
        self.nparams = len(self.params)
        self.outputs: list[_Layout] = []
        for j, (dims, dtype) in enumerate(plan.outputs):
            sh = HloSharding.parse(out_texts[j]) if out_texts else HloSharding.replicate()
            self.outputs.append(_Layout(dims, dtype, sh, self.devices, r))
        self.handlers = [pjrt.result_handler(o.aval, o.gspmd) for o in self.outputs]
        self.is_tuple = plan.is_tuple

    def argument(self, k: int, a: Any) -> Any:
        """The jaxlib global array to pass for argument ``k``."""
        spec, shard_spec, layout = self.params[k]
        if type(a) is ShardedArray:
            if a._layout.same(layout):
                a._layout = layout  # the same layout: next time an identity check suffices
                return a._global_array()
            if a.shape != layout.dims or a.dtype != layout.dtype:
                err = ShapeError if a.shape != layout.dims else DTypeError
                raise err(f"{spec._where('')} is a ShardedArray {a.dtype}{list(a.shape)}, expected {spec.shape}")
            if layout.sharding.is_manual or a.sharding.is_manual:
                raise ShapeError(
                    f"{spec._where('')} is a ShardedArray with sharding {a.sharding} on "
                    f"{[str(d) for d in a.devices]}; the parameter needs {layout.sharding} on "
                    f"{[str(d) for d in layout.devices]} and a manual array cannot be resharded"
                )
            # Another sharding or other devices: resharded through the host.
            return _place(layout, a.to_numpy())._global_array()
        if isinstance(a, (list, tuple)):
            return self._from_shards(spec, shard_spec, layout, a)
        host = self._host_value(spec, a)
        if layout.sharding.is_manual or layout.sharding.kind == "unreduced":
            raise ShapeError(
                f"{spec._where('')} has the sharding {layout.sharding}, which has no global value to split: pass a "
                f"list of one {shard_spec.shape} per device"
            )
        return _place(layout, host)._global_array()

    def _from_shards(self, spec: _ParamSpec, shard_spec: _ParamSpec, layout: _Layout, a: Sequence[Any]) -> Any:
        devs = layout.local_devices
        if len(a) != len(devs):
            mine = " of this process" if len(devs) != len(layout.devices) else ""
            raise ShapeError(
                f"{spec._where('')} is a list of {len(a)} shards, expected one per device{mine} ({len(devs)}: "
                f"{', '.join(str(d) for d in devs)}), each {shard_spec.shape} for sharding {layout.sharding}"
            )
        bufs = [shard_spec.to_buffer(x, d, f"shard {k} ({d}) of ") for k, (x, d) in enumerate(zip(a, devs,
                                                                                                  strict=True))]
        return pjrt.assemble_global(layout.aval, layout.gspmd, bufs)

    @staticmethod
    def _host_value(spec: _ParamSpec, a: Any) -> np.ndarray[Any, Any]:
        if isinstance(a, DeviceArray):
            a._live()
            host = a.to_numpy()
        elif isinstance(a, (np.ndarray, np.generic)):
            host = np.asarray(a)
        elif isinstance(a, (bool, int, float, complex)):
            if spec.dims != ():
                raise spec.mismatch(a)
            from ._arguments import _scalar_as

            x = _scalar_as(a, spec.etype, spec.dtype)
            if x is None:
                raise DTypeError(f"{spec._where('')} is the Python {type(a).__name__} {a!r}, which does not fit "
                                 f"{spec.shape}")
            return np.asarray(x)
        elif a is None or isinstance(a, (str, bytes)) or not hasattr(a, "__array__"):
            raise DTypeError(
                f"{spec._where('')} is a {type(a).__name__}; pass a numpy array of the global shape {spec.shape}, "
                "a list of per-device shards, or a ShardedArray"
            )
        else:
            host = _native(np.asarray(a), spec._where(""))
        if host.shape != spec.dims:
            raise spec.mismatch(host)
        if host.dtype != spec.dtype:
            if host.dtype.isnative or host.dtype.newbyteorder("=") != spec.dtype:
                raise spec.mismatch(host)
            host = host.astype(spec.dtype)
        return host

    def run(self, exe: Executable, args: Sequence[Any]) -> ShardedArray | tuple[ShardedArray, ...]:
        if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
            raise ShapeError(f"{self.name}: execute_sharded takes a list of {self.nparams} arguments, got "
                             f"{type(args).__name__}")
        if len(args) != self.nparams:
            raise self.plan.count_error(len(args))
        arrays = []
        k = 0
        for a, p in zip(args, self.params):  # noqa: B905 (count checked above)
            g = a._global if type(a) is ShardedArray and a._layout is p[2] else None
            arrays.append(g if g is not None else self.argument(k, a))  # the fast path: device-resident
            k += 1
        outs = pjrt.execute_spmd(exe._exe, arrays, self.handlers, self.name)
        make = ShardedArray._make
        if not self.is_tuple:
            return make(self.outputs[0], outs[0], None)
        return tuple(make(lay, o, None) for lay, o in zip(self.outputs, outs, strict=True))


def execute_sharded(exe: Executable, args: Sequence[Any]) -> ShardedArray | tuple[ShardedArray, ...]:
    """:meth:`Executable.execute_sharded <xlasdk.Executable.execute_sharded>`."""
    return exe.execute_sharded(args)  # type: ignore[no-any-return]
