"""Just enough of the protobuf wire format to unwrap XLA's dump protos.

A walker over top-level ``(field number, wire type, value)`` triples, used to recognise an
``HloModuleProto`` (and the ``HloProto`` / ``HloSnapshot`` wrappers XLA's dump flags write)
without depending on XLA's proto classes.
"""

from __future__ import annotations

from typing import Any


def _varint(b: bytes, i: int) -> tuple[int, int]:
    r = 0
    shift = 0
    while True:
        if i >= len(b):
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        r |= (c & 0x7F) << shift
        if not c & 0x80:
            return r, i
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _proto_fields(b: bytes) -> list[tuple[int, int, Any]]:
    """Top-level ``(field number, wire type, value)`` of a protobuf message; ValueError if malformed."""
    out: list[tuple[int, int, Any]] = []
    i = 0
    n = len(b)
    while i < n:
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise ValueError("field number 0")
        v: Any
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i : i + 8], i + 8
        elif wt == 2:
            ln, i = _varint(b, i)
            v, i = b[i : i + ln], i + ln
        elif wt == 5:
            v, i = b[i : i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wt}")
        if i > n:
            raise ValueError("truncated message")
        out.append((num, wt, v))
    return out


def _printable_utf8(v: bytes) -> bool:
    try:
        s = v.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return s.isprintable()


def _find_module_proto(data: bytes) -> bytes | None:
    """The ``HloModuleProto`` bytes inside ``data``, or None; ValueError if ``data`` is no proto.

    Accepts an ``HloModuleProto`` itself (field 1 = name, field 3 = computations), or the
    wrappers XLA's dump flags write: ``HloProto`` (``*.hlo.pb``: field 1 = the module) and
    ``HloSnapshot`` (field 1 = an ``HloProto``).
    """
    msg = data
    for _ in range(3):
        fs = _proto_fields(msg)
        if not fs:
            return None
        f1 = [v for num, wt, v in fs if num == 1 and wt == 2]
        has_comps = any(num == 3 and wt == 2 for num, wt, _ in fs)
        if f1 and _printable_utf8(f1[0]) and has_comps:
            return msg
        if f1 and not _printable_utf8(f1[0]):
            try:
                _proto_fields(f1[0])
            except ValueError:
                if has_comps:  # a module whose name is not text: proto3 strings must be UTF-8 (XLA refuses them)
                    raise ValueError(f"the module's name {f1[0][:40]!r} is not UTF-8 text, as a protobuf string "
                                     "must be") from None
                raise
            msg = f1[0]
            continue
        return None
    return None
