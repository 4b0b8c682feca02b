"""Hostile .npy and .npz inputs files for ``xlasdk run --input`` / ``--inputs`` (issue 31, finding 6).

:func:`make(seed, i)` gives the ``i``-th file of a seed, a function of both: a :class:`Case`
whose ``data`` is one of the ways an inputs file can lie or break (see :data:`NPY_KINDS` and
:data:`NPZ_KINDS`): headers that claim 4 TiB, ``10**30`` elements, negative or non-integer
dimensions, Python objects, unknown dtypes, headers nested too deeply; archives cut short,
with a member that fails its CRC, a member without ``.npy``, a member twice, a zip bomb whose
members inflate to GiB, ``__dtypes__`` manifests nested 100,000 deep or of the wrong types;
and random byte flips and cuts of valid files. ``Case.valid_possible`` is True for the random
mutations, which may leave a file that is still valid (a flipped data byte).

The program they are given to, :data:`PROGRAM`, takes one ``f32[4]`` parameter ``x``.
"""

from __future__ import annotations

import io
import random
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

PROGRAM = """HloModule add

ENTRY main {
  x = f32[4] parameter(0)
  ROOT r = f32[4] add(x, x)
}
"""


@dataclass(frozen=True)
class Case:
    key: str  # the kind and index: names the file
    suffix: str  # ".npy" or ".npz"
    data: bytes
    valid_possible: bool = False  # a random mutation may leave a valid file


def npy(shape: object, descr: object = "<f4", data: bytes = b"", fortran: object = False, version: int = 1,
        header: str | None = None) -> bytes:
    """An .npy file with exactly this header (none of numpy's checks), then ``data``."""
    text = header if header is not None else repr({"descr": descr, "fortran_order": fortran, "shape": shape})
    raw = text.encode("latin1" if version < 3 else "utf-8", "replace")
    size_len = 2 if version == 1 else 4
    pad = (64 - (8 + size_len + len(raw) + 1) % 64) % 64
    raw = raw + b" " * pad + b"\n"
    length = struct.pack("<H", len(raw) % 65536) if version == 1 else struct.pack("<I", len(raw))
    return b"\x93NUMPY" + bytes([version, 0]) + length + raw + data


def valid_npy() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.arange(4, dtype=np.float32))
    return buf.getvalue()


def npz(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def valid_npz(extra: dict[str, bytes] | None = None) -> bytes:
    return npz({"x.npy": valid_npy(), **(extra or {})})


def manifest(value: str) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.array(value))
    return buf.getvalue()


def zip_bomb(inflated: int) -> bytes:
    """An .npz whose one member, ``x.npy``, claims f32 of ``inflated`` bytes (zeros) and inflates to
    them from about a thousandth of the size."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z, z.open("x.npy", "w", force_zip64=True) as f:
        f.write(npy((inflated // 4,)))
        chunk = b"\0" * (1 << 20)
        for _ in range(inflated >> 20):
            f.write(chunk)
    return buf.getvalue()


def _lying_size(data: bytes, size: int) -> bytes:
    """A stored archive whose directory says its first member inflates to ``size`` bytes."""
    b = bytearray(data)
    cd = b.rfind(b"PK\x01\x02")
    b[cd + 24 : cd + 28] = struct.pack("<I", size & 0xFFFFFFFF)
    lh = b.find(b"PK\x03\x04")
    b[lh + 22 : lh + 26] = struct.pack("<I", size & 0xFFFFFFFF)
    return bytes(b)


def _flag(data: bytes, flag: int) -> bytes:
    b = bytearray(data)
    for sig, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        i = b.find(sig)
        b[i + at] |= flag
    return bytes(b)


def _method(data: bytes, method: int) -> bytes:
    b = bytearray(data)
    for sig, at in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        i = b.find(sig)
        b[i + at : i + at + 2] = struct.pack("<H", method)
    return bytes(b)


def _bad_crc(data: bytes) -> bytes:
    b = bytearray(data)
    i = b.find(b"\x93NUMPY") + 128  # the first data byte of the stored x.npy
    b[i] ^= 0xFF
    return bytes(b)


Gen = Callable[[random.Random], bytes]

#: name -> (generator of the .npy's bytes)
NPY_KINDS: dict[str, Gen] = {
    "empty": lambda r: b"",
    "not_npy": lambda r: b"hello, world\n" * r.randint(1, 50),
    "magic_only": lambda r: b"\x93NUMPY",
    "bad_version": lambda r: b"\x93NUMPY" + bytes([r.choice([0, 4, 9, 255]), 0]) + b"\x10\x00" + b" " * 16,
    "header_cut": lambda r: valid_npy()[: r.randint(9, 60)],
    "header_huge_length": lambda r: b"\x93NUMPY\x02\x00" + struct.pack("<I", r.choice([10**6, 2**31, 2**32 - 1])),
    "header_not_literal": lambda r: npy(None, header="{'descr': __import__('os'), 'shape': (4,)}"),
    "header_nested": lambda r: npy(None, header="(" * r.choice([100, 1000, 5000]) + ")" * 10),
    "header_not_dict": lambda r: npy(None, header=repr([1, 2, 3])),
    "header_keys": lambda r: npy(None, header=repr({"descr": "<f4", "shape": (4,)})),
    "header_extra_key": lambda r: npy(None, header=repr({"descr": "<f4", "shape": (4,), "fortran_order": False,
                                                         "x": 1})),
    "shape_huge": lambda r: npy((r.choice([1 << 40, 1 << 33, 1 << 62]),)),
    "shape_bigint": lambda r: npy((10 ** r.randint(19, 60),)),
    "shape_product_bigint": lambda r: npy((1 << 31, 1 << 31, 1 << 31)),
    "shape_zero_and_huge": lambda r: npy((0, r.choice([10**30, 1 << 62, 1 << 40]), 1 << 40)),
    "shape_negative": lambda r: npy((r.randint(-(10**6), -1),)),
    "shape_float": lambda r: npy((4.0,)),
    "shape_bool": lambda r: npy((True,)),
    "shape_str": lambda r: npy(("4",)),
    "shape_not_tuple": lambda r: npy(r.choice([4, [4], "4", None, {4: 4}])),
    "rank_65": lambda r: npy((1,) * 65),
    "descr_object": lambda r: npy((4,), r.choice(["|O", "O", [("a", "|O")]])),
    "descr_unknown": lambda r: npy((4,), r.choice(["<x9", "zz", "", 5, None, "<f0", "<f100000"])),
    "descr_nested": lambda r: npy((4,), [("a", [("b", [("c", "<f4")])])] * 3),
    "descr_deep": lambda r: npy((4,), "[" * 2000),
    "descr_zero_size": lambda r: npy((r.randint(0, 8),), r.choice(["|V0", "<U0", "|S0"])),
    "descr_subarray": lambda r: npy((4,), ("<f4", (r.randint(1, 3),)), data=b"\0" * 48),
    "fortran_not_bool": lambda r: npy((4,), fortran=r.choice([1, "yes", None])),
    "data_cut": lambda r: npy((4,), data=b"\0" * r.randint(0, 15)),
    "data_extra": lambda r: npy((4,), data=b"\0" * r.randint(17, 4096)),
    "claims_more": lambda r: npy((r.randint(5, 10**9),), data=b"\0" * 16),
    "version_3_bad_utf8": lambda r: b"\x93NUMPY\x03\x00" + struct.pack("<I", 64) + b"\xff" * 63 + b"\n",
    "flip": lambda r: _flip(r, valid_npy()),
    "cut": lambda r: valid_npy()[: r.randint(0, len(valid_npy()) - 1)],
    "header_random": lambda r: _random_header(r),
}

_DIMS = (0, 1, 2, 3, 4, 5, 255, 1 << 31, 1 << 32, 1 << 62, 1 << 63, 1 << 64, 10**30, -1, -(1 << 63))
_DESCRS = ("<f4", ">f4", "|b1", "<i8", "<c8", "<M8[ns]", "<m8[s]", ">U10", "|S3", "|V2", "<f1", "<f2", "|u1",
           [("a", "<f4")], [("a", "<f4"), ("b", ">i2")], "|V0", "O", "<f16", "", "<x1")


def _random_header(r: random.Random) -> bytes:
    """A header of dimensions and dtypes drawn from pools of the usual and the hostile, with data
    of the size it claims (when small) or of a random size."""
    shape = tuple(r.choice(_DIMS) for _ in range(r.randint(0, 4)))
    descr = r.choice(_DESCRS)
    try:
        need = int(np.prod([max(d, 0) for d in shape], dtype=object)) * np.dtype(descr).itemsize
    except (TypeError, ValueError):
        need = 16
    size = need if 0 <= need <= 4096 and r.random() < 0.7 else r.randint(0, 64)
    return npy(shape, descr, data=bytes(r.randrange(256) for _ in range(size)), fortran=r.random() < 0.2)

#: name -> (generator of the .npz's bytes)
NPZ_KINDS: dict[str, Gen] = {
    "empty": lambda r: b"",
    "not_zip": lambda r: b"PK" + bytes(r.randrange(256) for _ in range(r.randint(0, 200))),
    "npy_as_npz": lambda r: valid_npy(),
    "cut": lambda r: valid_npz()[: r.randint(0, len(valid_npz()) - 1)],
    "bad_crc": lambda r: _bad_crc(valid_npz()),
    "member_without_npy": lambda r: npz({r.choice(["x", "x.npz", "x.txt", "x.npy.bak"]): valid_npy()}),
    "member_twice": lambda r: _twice(),
    "member_is_hostile_npy": lambda r: npz({"x.npy": NPY_KINDS[r.choice(sorted(NPY_KINDS))](r)}),
    "member_compressed_hostile": lambda r: npz({"x.npy": NPY_KINDS[r.choice(sorted(NPY_KINDS))](r)},
                                               zipfile.ZIP_DEFLATED),
    "zip_bomb": lambda r: zip_bomb(r.choice([64, 256]) << 20),
    "directory_lies": lambda r: _lying_size(valid_npz(), r.choice([1 << 31, 2**32 - 1, 0, 5])),
    "encrypted_flag": lambda r: _flag(valid_npz(), 0x1),
    "unknown_method": lambda r: _method(valid_npz(), r.choice([1, 6, 97, 99, 65535])),
    "many_members": lambda r: npz({f"m{k}.npy": valid_npy() for k in range(r.randint(2, 300))}),
    "nested_zip": lambda r: npz({"x.npy": valid_npz()}),
    "manifest_deep": lambda r: valid_npz({"__dtypes__.npy": manifest("[" * 100_000 + "]" * 100_000)}),
    "manifest_deep_dict": lambda r: valid_npz({"__dtypes__.npy": manifest('{"x": ' + "[" * 50_000 + "]" * 50_000
                                                                           + "}")}),
    "manifest_not_dict": lambda r: valid_npz({"__dtypes__.npy": manifest(r.choice(["[]", "1", "null", '"x"']))}),
    "manifest_values": lambda r: valid_npz({"__dtypes__.npy": manifest(r.choice(['{"x": 1}', '{"x": null}',
                                                                                  '{"x": {"y": 2}}']))}),
    "manifest_not_json": lambda r: valid_npz({"__dtypes__.npy": manifest("{" * r.randint(1, 50))}),
    "manifest_array": lambda r: valid_npz({"__dtypes__.npy": valid_npy()}),
    "manifest_huge": lambda r: valid_npz({"__dtypes__.npy": npy((1 << 40,), "<U1")}),
    "flip": lambda r: _flip(r, valid_npz()),
    "flip_compressed": lambda r: _flip(r, npz({"x.npy": valid_npy()}, zipfile.ZIP_DEFLATED)),
}

#: The kinds that may leave a valid file (the campaign then accepts exit 0).
MAY_PASS = frozenset({"npy/flip", "npy/header_random", "npz/flip", "npz/flip_compressed",
                      "npz/member_compressed_hostile", "npz/member_is_hostile_npy"})


def _twice() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("x.npy", valid_npy())
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Duplicate name"
            z.writestr("x.npy", valid_npy())
    return buf.getvalue()


def _flip(r: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(r.randint(1, 8)):
        b[r.randrange(len(b))] = r.randrange(256)
    return bytes(b)


def kinds() -> list[tuple[str, str, Gen]]:
    """Every kind as ``(suffix, name, generator)``, in a fixed order."""
    return ([(".npy", f"npy/{k}", g) for k, g in NPY_KINDS.items()]
            + [(".npz", f"npz/{k}", g) for k, g in NPZ_KINDS.items()])


def make(seed: int, i: int) -> Case:
    """The ``i``-th case of ``seed``: the kinds in turn (so any ``len(kinds())`` consecutive cases
    cover them all), each drawn with a generator seeded by ``(seed, i)``."""
    table = kinds()
    suffix, name, gen = table[i % len(table)]
    r = random.Random(seed * 1_000_003 + i)
    data = gen(r)
    return Case(f"{i:05d}-{name.replace('/', '-')}", suffix, data, valid_possible=name in MAY_PASS)

