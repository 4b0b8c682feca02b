"""Reading the .npy and .npz files ``xlasdk run`` takes as inputs: every claim checked before data is read.

An inputs file is a user's file, and may be anything: a FIFO (reading it blocks forever), a
device (``/dev/zero`` never ends), a zip bomb (2 MB that inflate to 2 GB), an .npy header that
claims ``(10**30,)`` elements or 4 TiB, a truncated archive, a member that fails its CRC, a
``__dtypes__`` entry nested 100,000 deep. Here:

- a path is checked with ``os.stat``, then opened without blocking and checked again on the open
  descriptor: anything but a regular file is refused before it is opened, or at the latest before
  a byte is read (:func:`open_regular`);
- an .npy header (numpy's format, versions 1 to 3) is read on its own: its shape must be a
  tuple of whole numbers >= 0, its dtype one numpy knows (or raw bytes of a size, as np.save
  writes ml_dtypes arrays), never Python objects, and the bytes it claims must be exactly the
  bytes that follow it, at most :func:`limit` in all (``XLASDK_MAX_FILE_BYTES``);
- an .npz must be a zip archive whose every member is ``NAME.npy`` (once), whose sizes as the
  archive states them add up to at most :func:`limit`, and whose members' headers agree with
  those sizes: so a zip bomb is refused from its directory and headers, before anything inflates;
- the data is read only when asked (:meth:`NpyArray.load`): ``xlasdk run`` first compares the
  declared shape and dtype with the parameter's, so a member that cannot be an input is never
  inflated; a CRC that fails, an archive cut short, are errors naming the file and the member.

Every failure is a :class:`~xlasdk.cli._common.UsageError` (exit 2) naming the flag, the file
(and the member) and the problem.
"""

from __future__ import annotations

import ast
import lzma
import os
import re
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, Final

import numpy as np

from xlasdk._atomic import MAX_FILE_BYTES, file_kind

from ._common import UsageError

__all__ = ["NpyArray", "limit", "npy_file", "npz_members", "open_regular"]

#: numpy's own bound on an .npy header (``np.load``'s ``max_header_size``).
MAX_HEADER_BYTES: Final = 10_000
#: The most members an .npz may have.
MAX_MEMBERS: Final = 65_536
#: The most bytes of a ``__dtypes__`` manifest.
MAX_MANIFEST_BYTES: Final = 1 << 20

_MAGIC: Final = b"\x93NUMPY"
_CHUNK: Final = 4 << 20
# What reading a damaged or hostile zip archive raises, in the standard library's readers.
_ZIP_ERRORS: Final = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError,
                      RuntimeError, zlib.error, lzma.LZMAError, struct.error, OverflowError, KeyError)


def limit() -> int:
    """The most bytes an inputs file may hold or claim: ``XLASDK_MAX_FILE_BYTES``, else 16 GiB."""
    try:
        value = int(os.environ.get("XLASDK_MAX_FILE_BYTES", "") or MAX_FILE_BYTES)
    except ValueError:
        return MAX_FILE_BYTES
    return value if value > 0 else MAX_FILE_BYTES


def _bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n:,} bytes ({n / size:,.1f} {unit})"
    return f"{n:,} bytes"


def open_regular(path: str, what: str) -> IO[bytes]:
    """``path`` opened for reading, refused unless it is a regular file: checked with ``os.stat``
    first (a special file is never opened), then opened without blocking (a FIFO swapped in
    would block ``open``) and checked again on the descriptor, before a byte is read."""
    if not path:
        raise UsageError(f"{what}: an empty file name")
    try:  # not even opened unless regular (opening some devices acts: a watchdog, a tape rewinds)
        st = os.stat(path)
    except (OSError, ValueError):
        pass  # os.open below says why
    else:
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{what}: {path}: is {file_kind(st.st_mode)}, not a regular file (inputs are read from "
                             ".npy and .npz files)")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UsageError(f"{what}: {path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{what}: {path}: is a directory, not a file") from None
    except (OSError, ValueError) as e:  # ValueError: a NUL in the name
        raise UsageError(f"{what}: {path}: cannot open: {getattr(e, 'strerror', None) or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{what}: {path}: is {file_kind(st.st_mode)}, not a regular file (inputs are read from "
                             ".npy and .npz files)")
        if st.st_size > limit():
            raise UsageError(f"{what}: {path}: holds {_bytes(st.st_size)}, more than the limit of "
                             f"{_bytes(limit())} (XLASDK_MAX_FILE_BYTES raises it)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@dataclass(frozen=True)
class NpyArray:
    """An array an .npy file (or an .npz member) declares, its data not read yet.

    ``shape`` and ``dtype`` are the header's (raw ``V<n>`` bytes for a descriptor numpy does not
    read, as np.save writes ml_dtypes arrays); ``where`` names it in messages (``file`` or
    ``file[key]``); :meth:`load` reads the data."""

    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    fortran_order: bool
    where: str
    _read: Callable[[], np.ndarray[Any, Any]]

    @property
    def nbytes(self) -> int:
        return _count(self.shape) * self.dtype.itemsize

    def stub(self) -> np.ndarray[Any, Any]:
        """An array of the declared shape and dtype that holds no data (every element the same
        zero bytes): for checks and messages, before the data is read."""
        base = np.zeros(1, self.dtype)
        return np.lib.stride_tricks.as_strided(base, shape=self.shape, strides=(0,) * len(self.shape),
                                               writeable=False)

    def load(self) -> np.ndarray[Any, Any]:
        """The array, read and checked (exact length; an .npz member's CRC)."""
        return self._read()


def _count(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _header(f: IO[bytes], where: str, what: str) -> tuple[tuple[int, ...], np.dtype[Any], bool, int]:
    """``(shape, dtype, fortran_order, header length)`` of the .npy at ``f``'s position."""

    def bad(problem: str) -> UsageError:
        return UsageError(f"{what}: {where}: not a readable .npy array ({problem})")

    head = f.read(8)
    if head.startswith(b"PK\x03\x04") and "[" not in where:
        raise UsageError(f"{what}: {where}: holds several arrays (an .npz archive); use --inputs {where}, or "
                         f"--input NAME={where}:KEY for one of its arrays")
    if len(head) < 8 or head[:6] != _MAGIC:
        raise bad("it does not start with numpy's \\x93NUMPY header")
    major = head[6]
    if major not in (1, 2, 3):
        raise bad(f".npy format version {major}.{head[7]}, not 1, 2 or 3")
    size_len = 2 if major == 1 else 4
    raw_len = f.read(size_len)
    if len(raw_len) != size_len:
        raise bad("its header is cut short")
    hlen = int.from_bytes(raw_len, "little")
    if hlen > MAX_HEADER_BYTES:
        raise bad(f"a header of {hlen:,} bytes, more than numpy's limit of {MAX_HEADER_BYTES:,}")
    raw = f.read(hlen)
    if len(raw) != hlen:
        raise bad("its header is cut short")
    try:
        text = raw.decode("utf-8" if major >= 3 else "latin1")
        d = ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError):
        raise bad(f"its header is not a Python literal: {raw[:80]!r}") from None
    if not isinstance(d, dict) or set(d) != {"descr", "shape", "fortran_order"}:
        raise bad("its header is not numpy's {'descr', 'fortran_order', 'shape'} dictionary")
    shape, descr, fortran = d["shape"], d["descr"], d["fortran_order"]
    if not isinstance(shape, tuple) or not all(type(n) is int and n >= 0 for n in shape) or len(shape) > 64:
        raise bad(f"its header claims shape {str(shape)[:80]}: not a tuple of at most 64 whole numbers >= 0")
    if not isinstance(fortran, bool):
        raise bad(f"fortran_order is {str(fortran)[:40]}, not True or False")
    dtype = _dtype(descr, bad)
    if _count(tuple(max(d, 1) for d in shape)) * dtype.itemsize >= 1 << 62:  # numpy's bound, zero dimensions or not
        raise bad(f"its header claims shape {str(shape)[:80]}, more elements than numpy can address "
                  "(even with a dimension of 0)")
    return shape, dtype, fortran, 8 + size_len + hlen


def _dtype(descr: Any, bad: Callable[[str], UsageError]) -> np.dtype[Any]:
    try:
        dt: np.dtype[Any] = np.lib.format.descr_to_dtype(descr)
    except (TypeError, ValueError, KeyError, RecursionError):
        m = re.fullmatch(r"[<>|=]?[a-zA-Z](\d+)", descr) if isinstance(descr, str) else None
        if m is None or not 0 < int(m.group(1)) <= 64:
            raise bad(f"dtype {str(descr)[:80]} is not one numpy reads") from None
        dt = np.dtype(f"V{int(m.group(1))}")  # np.save's descriptor of an ml_dtypes array ('<f1'): raw bytes
    if dt.hasobject:
        raise bad("it holds Python objects (a pickle), which are never read")
    if dt.itemsize == 0:
        raise bad(f"dtype {dt.str} has no size")
    if dt.subdtype is not None:  # numpy writes a subarray's dimensions into the shape, never into descr
        raise bad(f"dtype {dt} is a subarray dtype, which numpy never writes as an array's descr")
    return dt


def _check_size(shape: tuple[int, ...], dtype: np.dtype[Any], held: int, where: str, what: str) -> None:
    """The data the header claims must be exactly the ``held`` bytes after it, within :func:`limit`."""
    need = _count(shape) * dtype.itemsize
    dims = ",".join(str(d) for d in shape)
    claim = f"its header claims {dtype.str}[{dims}], {_bytes(need)}"
    if need > limit():
        raise UsageError(f"{what}: {where}: {claim}, more than the limit of {_bytes(limit())} (XLASDK_MAX_FILE_BYTES "
                         "raises it)")
    if need != held:
        problem = "truncated" if need > held else "bytes after its array"
        raise UsageError(f"{what}: {where}: {problem}: {claim}, but {_bytes(held)} of data follow the header")


def _read_data(f: IO[bytes], shape: tuple[int, ...], dtype: np.dtype[Any], fortran: bool,
               where: str, what: str) -> np.ndarray[Any, Any]:
    need = _count(shape) * dtype.itemsize
    buf = bytearray(need)
    view = memoryview(buf)
    got = 0
    while got < need:  # in chunks: zipfile's read(n) of a large n joins its pieces quadratically
        n = f.readinto(view[got : got + _CHUNK]) if hasattr(f, "readinto") else 0
        if not n:
            break
        got += n
    if got != need:
        raise UsageError(f"{what}: {where}: truncated: {_bytes(got)} of the {_bytes(need)} its header claims")
    if f.read(1):
        raise UsageError(f"{what}: {where}: bytes after its array (the file changed while read)")
    a = np.frombuffer(buf, dtype=dtype) if need else np.zeros(0, dtype)
    try:
        return a.reshape(shape, order="F" if fortran else "C")
    except ValueError as e:  # pragma: no cover - the header's checks make the sizes agree
        raise UsageError(f"{what}: {where}: not a readable .npy array ({e})") from None


def npy_file(path: str, what: str) -> NpyArray:
    """The array of the .npy file ``path``, its header checked; its data read by ``load()``."""
    with open_regular(path, what) as f:
        size = os.fstat(f.fileno()).st_size
        shape, dtype, fortran, hlen = _header(f, path, what)
    _check_size(shape, dtype, size - hlen, path, what)

    def read() -> np.ndarray[Any, Any]:
        with open_regular(path, what) as f:
            again = _header(f, path, what)
            if again[:3] != (shape, dtype, fortran):
                raise UsageError(f"{what}: {path}: the file changed while read")
            return _read_data(f, shape, dtype, fortran, path, what)

    return NpyArray(shape, dtype, fortran, path, read)


def _not_npz(path: str, head: bytes) -> str:
    if head.startswith(b"PK"):
        return "a damaged or truncated zip archive"
    hint = ("; an HloSnapshot holds its own arguments: give it as FILE instead"
            if ".snapshot" in os.path.basename(path) else "")
    return f"it is not a zip archive of .npy arrays, as numpy.savez writes{hint}"


def npz_members(path: str, what: str) -> list[tuple[str, NpyArray]]:
    """The arrays of the .npz ``path`` in archive order, each header checked against the archive's
    sizes (so nothing inflates past what the headers claim); data read by each ``load()``."""
    out: list[tuple[str, NpyArray]] = []
    with open_regular(path, what) as f:
        head = f.read(8)
        f.seek(0)
        if head.startswith(_MAGIC):
            raise UsageError(f"{what}: {path}: a single array; use --input NAME={path}")
        try:
            z = zipfile.ZipFile(f)
        except _ZIP_ERRORS as e:
            raise UsageError(f"{what}: {path}: not a readable .npz file ({_not_npz(path, head)}: {e})") from None
        with z:
            infos = z.infolist()
            if len(infos) > MAX_MEMBERS:
                raise UsageError(f"{what}: {path}: {len(infos):,} members, more than {MAX_MEMBERS:,}")
            total = sum(i.file_size for i in infos)
            if total > limit():
                raise UsageError(f"{what}: {path}: its members inflate to {_bytes(total)}, more than the limit of "
                                 f"{_bytes(limit())} (XLASDK_MAX_FILE_BYTES raises it)")
            seen: set[str] = set()
            for info in infos:
                name = info.filename
                if info.is_dir():
                    continue
                if not name.endswith(".npy"):
                    raise UsageError(f"{what}: {path}: member {name!r} is not an .npy array (numpy.savez names each "
                                     "member NAME.npy)")
                key = name[:-4]
                if key in seen:
                    raise UsageError(f"{what}: {path}: holds member {name!r} twice")
                seen.add(key)
                where = f"{path}[{key}]"
                try:
                    with z.open(info) as m:
                        shape, dtype, fortran, hlen = _header(m, where, what)
                except UsageError:
                    raise
                except _ZIP_ERRORS as e:
                    raise UsageError(f"{what}: {where}: not a readable array ({type(e).__name__}: {e})") from None
                _check_size(shape, dtype, info.file_size - hlen, where, what)
                reader = _member_reader(path, name, (shape, dtype, fortran), what, where)
                out.append((key, NpyArray(shape, dtype, fortran, where, reader)))
    return out


def _member_reader(path: str, name: str, declared: tuple[tuple[int, ...], np.dtype[Any], bool], what: str,
                   where: str) -> Callable[[], np.ndarray[Any, Any]]:
    def read() -> np.ndarray[Any, Any]:
        with open_regular(path, what) as f:
            try:
                with zipfile.ZipFile(f) as z:
                    info = z.getinfo(name)
                    with z.open(info) as m:
                        shape, dtype, fortran, hlen = _header(m, where, what)
                        if (shape, dtype, fortran) != declared:  # the archive changed since it was checked
                            raise UsageError(f"{what}: {where}: the file changed while read")
                        _check_size(shape, dtype, info.file_size - hlen, where, what)
                        return _read_data(m, shape, dtype, fortran, where, what)
            except UsageError:
                raise
            except _ZIP_ERRORS as e:
                raise UsageError(f"{what}: {where}: not a readable array ({type(e).__name__}: {e})") from None

    return read
