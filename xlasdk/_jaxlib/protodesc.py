"""XLA's proto schemas (``xla/service/hlo.proto`` and the files it imports) as the installed jaxlib
was built with them, for reading text-format protos with the ``protobuf`` package.

jaxlib ships no ``.proto`` files, but protobuf's C++ generated code keeps each ``.proto`` file's
serialized ``FileDescriptorProto`` in the shared library (a ``\\n<length>xla/service/hlo.proto``
run of bytes in ``libjax_common.so`` for jaxlib 0.10.2 through 0.12). :func:`message_class` finds
those bytes (the library is memory-mapped, not read), walks the top-level fields of the
``FileDescriptorProto`` to find where it ends, checks it by parsing it and adding it to a private
descriptor pool (with its dependencies: XLA's from the same library, ``google/protobuf/*.proto``
from the protobuf package), and returns the generated message class. The schema therefore always
matches the installed jaxlib. Everything is cached per process (about 0.2 s the first time, protobuf's
import included).

The ``protobuf`` package is an optional dependency (``pip install "xlasdk[snapshots]"``); without
it, or when no library of jaxlib holds the descriptor (a jaxlib built another way),
:class:`SchemaUnavailable` says so.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import mmap
import os
from typing import Any, Final

from ..errors import XlaSdkError

__all__ = ["SchemaUnavailable", "message_class", "INSTALL_HINT"]

INSTALL_HINT: Final = 'pip install "xlasdk[snapshots]" (the protobuf package)'
_ROOT: Final = "xla/service/hlo.proto"
_MAX_DESCRIPTOR: Final = 4 << 20  # bytes; hlo.proto's is about 10 kB
_MAX_FIELD: Final = 20  # FileDescriptorProto's field numbers are 1..15 today
_SINGULAR: Final = frozenset({1, 2, 8, 9, 12, 13})  # name, package, options, source_code_info, syntax, edition


class SchemaUnavailable(XlaSdkError):
    """XLA's proto schema cannot be had in this process: the protobuf package is missing, or no
    library of the installed jaxlib holds ``xla/service/hlo.proto``'s descriptor."""


def _varint(buf: Any, i: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= end or shift > 63:
            raise ValueError("truncated varint")
        c = buf[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return value, i


def _descriptor_end(buf: Any, start: int) -> int:
    """Where the serialized ``FileDescriptorProto`` that starts at ``start`` ends: after its last
    top-level field. protoc writes the fields in ascending number, so the first key that is not a
    FileDescriptorProto field in order (the zero padding after the array, another file's
    descriptor) ends it."""
    end = min(len(buf), start + _MAX_DESCRIPTOR)
    i, last = start, 0
    while i < end:
        try:
            key, j = _varint(buf, i, end)
            number, wire = key >> 3, key & 7
            if not 0 < number <= _MAX_FIELD or number < last or (number == last and number in _SINGULAR):
                return i
            if wire == 2:
                length, j = _varint(buf, j, end)
                j += length
            elif wire == 0:
                _, j = _varint(buf, j, end)
            else:
                return i
        except ValueError:
            return i
        if j > end:
            return i
        i, last = j, number
    return i


def _jaxlib_libraries() -> list[str]:
    """jaxlib's shared libraries, largest first (the descriptors are in the big common one)."""
    spec = importlib.util.find_spec("jaxlib")
    if spec is None or not spec.submodule_search_locations:
        return []
    found: list[tuple[int, str]] = []
    for folder in spec.submodule_search_locations:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if ".so" in name or name.endswith((".dylib", ".pyd", ".dll")):
                path = os.path.join(folder, name)
                try:
                    found.append((os.path.getsize(path), path))
                except OSError:
                    continue
    return [p for _, p in sorted(found, reverse=True)]


def _descriptor_bytes(name: str, libraries: list[str], fdp_type: Any) -> bytes | None:
    """The serialized ``FileDescriptorProto`` of ``name`` from the first library that holds one
    that parses and names itself ``name``."""
    raw = name.encode()
    needle = b"\n" + bytes([len(raw)]) + raw  # field 1 (name), length-delimited; names are < 128 bytes
    for path in libraries:
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                at = m.find(needle)
                while at >= 0:
                    blob = bytes(m[at:_descriptor_end(m, at)])
                    try:
                        parsed = fdp_type.FromString(blob)
                    except Exception:  # protobuf's DecodeError: not a descriptor here
                        parsed = None
                    if parsed is not None and parsed.name == name and parsed.package:
                        return blob
                    at = m.find(needle, at + 1)
        except (OSError, ValueError):
            continue
    return None


def _protobuf() -> tuple[Any, Any, Any]:
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        raise SchemaUnavailable(f"reading a text-format proto needs the protobuf package: {INSTALL_HINT}") from None
    return descriptor_pb2, descriptor_pool, message_factory


@functools.lru_cache(maxsize=1)
def _pool() -> Any:
    """A descriptor pool holding ``xla/service/hlo.proto`` and its imports, from jaxlib's library."""
    descriptor_pb2, descriptor_pool, _ = _protobuf()
    libraries = _jaxlib_libraries()
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(name: str, depth: int) -> None:
        if name in added:
            return
        if depth > 16:
            raise SchemaUnavailable(f"{name}: the imports of {_ROOT} nest more than 16 deep")
        added.add(name)
        fdp = descriptor_pb2.FileDescriptorProto()
        if name.startswith("google/protobuf/"):  # well-known types: the protobuf package's own
            module = "google.protobuf." + name.removeprefix("google/protobuf/").removesuffix(".proto") + "_pb2"
            try:
                importlib.import_module(module)
                descriptor_pool.Default().FindFileByName(name).CopyToProto(fdp)
            except (ImportError, KeyError) as e:
                raise SchemaUnavailable(f"{name} (imported by XLA's protos) is not in the protobuf package: "
                                        f"{e}") from None
        else:
            blob = _descriptor_bytes(name, libraries, descriptor_pb2.FileDescriptorProto)
            if blob is None:
                where = ", ".join(os.path.basename(p) for p in libraries[:3]) or "no jaxlib library found"
                raise SchemaUnavailable(f"the descriptor of {name} is not in the installed jaxlib's libraries "
                                        f"({where})")
            fdp.ParseFromString(blob)
        for dep in fdp.dependency:
            add(dep, depth + 1)
        try:
            pool.Add(fdp)
        except Exception as e:  # protobuf raises TypeError / its own errors on a bad schema
            raise SchemaUnavailable(f"the descriptor of {name} found in jaxlib does not build: {e}") from None

    add(_ROOT, 0)
    return pool


@functools.cache
def message_class(full_name: str) -> Any:
    """The protobuf message class of XLA's ``full_name`` (e.g. ``"xla.HloSnapshot"``), built from
    the descriptor the installed jaxlib embeds.

    Raises
    ------
    SchemaUnavailable
        When the protobuf package is missing (the message says how to install it), when jaxlib's
        libraries hold no usable descriptor, or when ``full_name`` is not one of its messages.
    """
    _, _, message_factory = _protobuf()
    pool = _pool()
    try:
        descriptor = pool.FindMessageTypeByName(full_name)
    except KeyError:
        raise SchemaUnavailable(f"jaxlib's {_ROOT} has no message {full_name}") from None
    return message_factory.GetMessageClass(descriptor)
