"""``jax.export`` files: what ``Exported.serialize()`` writes, read without JAX.

The file is a flatbuffer of JAX's schema (``jax/_src/export/serialization.fbs``, root table
``Exported``) around the StableHLO module as MLIR bytecode. :func:`read_jax_export` reads the
fields a runner needs with the ``flatbuffers`` package's table reader, by their slots in that
schema (the same slots in the files of jax 0.10, which records version 3, and jax 0.12, version 12):

====  =============================  ==================================================
slot  field                          read as
====  =============================  ==================================================
0     ``serialization_version``      uint16
1     ``function_name``              string
3     ``in_avals``                   vector of tables (only its length is read)
5     ``out_avals``                  vector of tables (only its length is read)
6     ``nr_devices_short``           uint16 (older files)
9     ``platforms``                  vector of strings
13    ``mlir_module_serialized``     vector of bytes: the module
14    ``calling_convention_version`` uint16
15    ``module_kept_var_idx``        vector of uint16: the arguments the module kept
18    ``nr_devices``                 uint32 (newer files; 0 when absent)
====  =============================  ==================================================

Every read is bounds-checked by the reader (a truncated or hostile buffer raises a Python
exception, turned into a :class:`~xlasdk.FormatError`); the module bytes then load as any MLIR
bytecode does (decoded in the worker process first).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import FormatError

__all__ = ["JaxExport", "read_jax_export"]

_BYTECODE_MAGIC = b"ML\xefR"


@dataclass(frozen=True)
class JaxExport:
    """The fields of a ``jax.export`` file that matter for running its module.

    Attributes
    ----------
    serialization_version: the version JAX recorded (3 in files of jax 0.10, 12 in those of jax 0.12).
    function_name: the exported function's name.
    platforms: the platforms it was lowered for (``("cpu",)``); with more than one, the module's
        first argument is the platform index (JAX's calling convention).
    nr_devices: the number of devices the module was lowered for (its shardings are in the module).
    calling_convention_version: JAX's calling-convention version of the module.
    in_count, out_count: the exported function's flat argument and result counts.
    module_kept_var_idx: which of the ``in_count`` arguments the module kept (JAX drops unused
        ones unless ``keep_unused=True``): the loaded computation takes these, in this order.
    mlir_module: the StableHLO module (MLIR bytecode).
    """

    serialization_version: int
    function_name: str
    platforms: tuple[str, ...]
    nr_devices: int
    calling_convention_version: int
    in_count: int
    out_count: int
    module_kept_var_idx: tuple[int, ...]
    mlir_module: bytes


def read_jax_export(data: bytes, what: str = "jax.export file") -> JaxExport:
    """The :class:`JaxExport` of the bytes of an ``Exported.serialize()`` file.

    Raises
    ------
    FormatError
        Not a flatbuffer of JAX's ``Exported`` table, truncated or corrupt, or without a module.
    """
    try:
        from flatbuffers import encode, number_types, packer, table
    except ImportError:  # pragma: no cover - a dependency of xlasdk
        raise FormatError(f"{what}: reading jax.export files needs the 'flatbuffers' package") from None
    buf = bytearray(data)
    try:
        if len(buf) < 8:
            raise ValueError("shorter than a flatbuffer header")
        root = encode.Get(packer.uoffset, buf, 0)
        if not 4 <= root < len(buf):
            raise ValueError(f"root table offset {root} outside the {len(buf)} bytes")
        tab = table.Table(buf, root)

        def slot(k: int) -> int:
            return int(tab.Offset(4 + 2 * k))

        def scalar(k: int, flags: object) -> int:
            o = slot(k)
            return int(tab.Get(flags, o + tab.Pos)) if o else 0

        def vector(k: int) -> tuple[int, int]:
            o = slot(k)
            if not o:
                return 0, 0
            start, n = int(tab.Vector(o)), int(tab.VectorLen(o))
            if start < 0 or n < 0 or start + n > len(buf):
                raise ValueError(f"field {k} runs past the end of the buffer")
            return start, n

        def string_at(pos: int) -> str:
            raw = tab.String(pos)
            return raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else str(raw)

        version = scalar(0, number_types.Uint16Flags)
        o = slot(1)
        name = string_at(o + tab.Pos) if o else ""
        in_count = vector(3)[1]
        out_count = vector(5)[1]
        start, n = vector(9)
        if start + 4 * n > len(buf):
            raise ValueError("the platforms run past the end of the buffer")
        platforms = tuple(string_at(start + 4 * j) for j in range(n))
        start, n = vector(13)
        module = bytes(buf[start:start + n])
        cc = scalar(14, number_types.Uint16Flags)
        start, n = vector(15)
        if start + 2 * n > len(buf):
            raise ValueError("module_kept_var_idx runs past the end of the buffer")
        kept = tuple(int(encode.Get(packer.uint16, buf, start + 2 * j)) for j in range(n))
        devices = scalar(18, number_types.Uint32Flags) or scalar(6, number_types.Uint16Flags)
    except FormatError:
        raise
    except Exception as e:  # struct.error, IndexError, UnicodeDecodeError, ValueError: a damaged buffer
        raise FormatError(
            f"{what}: a truncated or corrupt jax.export file (JAX's Exported flatbuffer of {len(buf)} bytes; "
            f"reading it failed: {type(e).__name__}: {str(e):.160})"
        ) from None
    if not module.startswith(_BYTECODE_MAGIC):
        raise FormatError(
            f"{what}: the jax.export file's mlir_module_serialized is "
            + ("missing" if not module else "not MLIR bytecode")
        )
    if any(k >= in_count for k in kept) or len(set(kept)) != len(kept):
        raise FormatError(f"{what}: module_kept_var_idx {list(kept)} does not index the {in_count} arguments")
    return JaxExport(version, name, platforms, devices, cc, in_count, out_count, kept, module)
