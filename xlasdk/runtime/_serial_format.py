"""The serialized executable format: magic, fixed header, JSON header, XLA's blob."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any, Final

from ..errors import FormatError
from ..shape import ProgramShape, Shape
from ..types import PrimitiveType

# -- deserialization --------------------------------------------------------------------------
_MAGIC: Final = b"XLASDK-EXECUTABLE\n"
_PREFIX: Final = struct.Struct("<IIQI")  # format version, header length, blob length, crc32
_FORMAT_VERSION: Final = 1


def _shape_to_json(s: Shape) -> Any:
    if s.is_tuple():
        return {"tuple": [_shape_to_json(x) for x in s.tuple_shapes()]}
    if s.is_token():
        return {"token": True}
    return {"etype": int(s.element_type()), "dims": list(s.dimensions())}


def pack(
    name: str, blob: bytes, platform: str, num_replicas: int, num_partitions: int, device_ids: list[int],
    program_shape: ProgramShape, jaxlib: str, xla_client_version: int,
) -> bytes:
    """The serialized executable: :data:`_MAGIC`, the fixed header, the JSON header, XLA's blob."""
    header = {
        "name": name,
        "jaxlib": jaxlib,
        "xla_client_version": xla_client_version,
        "platform": platform,
        "num_replicas": num_replicas,
        "num_partitions": num_partitions,
        "device_ids": device_ids,
        "parameter_names": list(program_shape.parameter_names()),
        "parameters": [_shape_to_json(s) for s in program_shape.parameter_shapes()],
        "result": _shape_to_json(program_shape.result_shape()),
    }
    hbytes = json.dumps(header, separators=(",", ":")).encode()
    crc = zlib.crc32(blob, zlib.crc32(hbytes))
    return _MAGIC + _PREFIX.pack(_FORMAT_VERSION, len(hbytes), len(blob), crc) + hbytes + blob


#: Deepest tuple nesting a header may describe (XLA's own programs stay far below it).
MAX_TUPLE_DEPTH = 64
#: Largest header (JSON) a serialized executable may have.
MAX_HEADER_BYTES = 1 << 24


def _shape_from_json(j: Any, depth: int = 0) -> Shape:
    if not isinstance(j, dict):
        raise ValueError(f"bad shape entry {j!r:.80}")
    if "tuple" in j:
        if depth >= MAX_TUPLE_DEPTH:
            raise ValueError(f"tuple shapes nested more than {MAX_TUPLE_DEPTH} deep")
        return Shape.tuple_shape(_shape_from_json(x, depth + 1) for x in j["tuple"])
    if j.get("token"):
        return Shape.token_shape()
    return Shape.array_shape(PrimitiveType(int(j["etype"])), [int(d) for d in j["dims"]])


def _parse(data: Any, what: str, verified: bool = False) -> tuple[dict[str, Any], bytes]:
    """(header, XLA blob) of :meth:`Executable.serialize` bytes, after every format check.

    ``verified``: the caller has already checked these exact bytes against a stronger checksum
    (the compile cache's sha256), so the crc32 is not computed again.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise FormatError(f"{what}: expected bytes, got {type(data).__name__}")
    if not (isinstance(data, bytes) or isinstance(data, memoryview) and isinstance(data.obj, bytes)
            and data.c_contiguous):
        data = bytes(data)  # a private copy of mutable buffers
    # Views of immutable bytes: the only copy made is the blob handed to XLA.
    view = memoryview(data).cast("B")
    n = len(view)
    if not n:
        raise FormatError(f"{what}: the data is empty")
    if view[: len(_MAGIC)].tobytes() != _MAGIC:
        if n < len(_MAGIC) and _MAGIC.startswith(view.tobytes()):
            raise FormatError(f"{what}: truncated: only {n} bytes")
        raise FormatError(
            f"{what}: not an xlasdk serialized executable (it does not start with {_MAGIC!r}; "
            f"starts with {bytes(view[:16])!r})"
        )
    fixed = len(_MAGIC) + _PREFIX.size
    if n < fixed:
        raise FormatError(f"{what}: truncated: {n} bytes, the fixed header alone is {fixed}")
    version, hlen, blen, crc = _PREFIX.unpack_from(view, len(_MAGIC))
    if version != _FORMAT_VERSION:
        raise FormatError(f"{what}: format version {version} is unsupported (xlasdk reads {_FORMAT_VERSION})")
    expected = fixed + hlen + blen
    if n != expected:
        kind = "truncated" if n < expected else "has trailing data"
        raise FormatError(f"{what}: {kind}: {n} bytes, the header says {expected}")
    if hlen > MAX_HEADER_BYTES:
        raise FormatError(f"{what}: corrupt header: {hlen} bytes long (at most {MAX_HEADER_BYTES})")
    hbytes = bytes(view[fixed : fixed + hlen])
    body = view[fixed + hlen :]
    if not verified and zlib.crc32(body, zlib.crc32(hbytes)) != crc:
        raise FormatError(f"{what}: corrupt: checksum mismatch")
    blob = bytes(body)
    try:
        header = json.loads(hbytes.decode())
        if not isinstance(header, dict):
            raise ValueError("header is not an object")
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError(f"{what}: corrupt header: {e}") from None
    except RecursionError:
        raise FormatError(f"{what}: corrupt header: nested too deeply") from None
    return header, blob
