"""Saving computations: the bytes of each format, and atomic writes of files."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._atomic import atomic_write, file_path
from .._jaxlib import mlir as _mlir
from ..errors import FormatError
from .artifact import serialize_portable_artifact
from .sniff import _SUFFIX_LIST, Format, PathLike, _parse_format, format_from_suffix

if TYPE_CHECKING:
    from ..program.computation import XlaComputation


def _atomic_write(path: str, data: bytes, check: Callable[[str], object] | None = None) -> None:
    """Write ``data`` to a synced temporary file beside ``path``, ``check`` it, rename it over ``path``."""
    atomic_write(path, data, check=check)


def stablehlo_file_text(module: object) -> str:
    """The text of a ``.mlir`` file: MLIR's pretty form with source locations, or the generic form
    where the pretty form would not parse back (StableHLO prints a rank-0 ``dynamic_slice`` that
    its own parser rejects), so that every saved file loads."""
    return _mlir.module_to_parsable_text(module, debug_info=True, always_check=True)


def computation_bytes(
    comp: XlaComputation, fmt: Format, *, target_version: str | None = None, what: str = "save"
) -> bytes:
    """``comp`` in the given format, as the bytes a file of that format holds."""
    if fmt is Format.HLO_TEXT:
        return comp.as_hlo_text().encode("utf-8")
    if fmt is Format.STABLEHLO_TEXT:
        return stablehlo_file_text(comp.compiler_ir()).encode("utf-8")
    if fmt is Format.PORTABLE_ARTIFACT:
        return serialize_portable_artifact(comp, target_version, what=what)
    return comp.as_serialized_hlo_module_proto()


def save_format(spath: str, format: Format | str | None, target_version: str | None) -> Format:
    """The format ``save_computation(comp, spath, format, target_version=...)`` writes.

    Raises
    ------
    FormatError
        For an unknown suffix or format, or a ``target_version`` for another format than ``.mlirbc``.
    """
    if os.path.isdir(spath):
        raise FormatError(f"save({spath!r}): is a directory; name the file to write (e.g. {spath.rstrip('/')}/"
                          "module.hlo)")
    if format is not None:
        fmt = _parse_format(format)
    else:
        found = format_from_suffix(spath)
        if found is None and spath.lower().endswith(".txt"):
            found = Format.HLO_TEXT
        if found is None:
            raise FormatError(f"save({spath!r}): unknown suffix; use one of {_SUFFIX_LIST}, or pass format=")
        fmt = found
    if target_version is not None and fmt is not Format.PORTABLE_ARTIFACT:
        raise FormatError(f"save({spath!r}): target_version applies only to .mlirbc portable artifacts")
    return fmt


def save_computation(
    comp: XlaComputation, path: PathLike, format: Format | str | None = None, *, target_version: str | None = None
) -> None:
    """Write ``comp`` to ``path`` in the format of its suffix (see :func:`load_computation`).

    The bytes are made first, then written to a temporary file in the same directory, synced and
    renamed over ``path``: readers never see half a file, and a module that cannot be serialized
    or a write that fails leaves an existing file exactly as it was.

    Raises
    ------
    FormatError
        For an unknown suffix, a module the format cannot hold (``mhlo`` ops in a portable
        artifact, a too-old ``target_version``), a directory that cannot be written, a ``path``
        that is (or links to) something other than a regular file, or one that is not a ``str`` or
        ``os.PathLike`` of one or holds a NUL character.
    """
    try:
        spath = file_path(path)
    except (TypeError, ValueError) as e:
        raise FormatError(f"save: {e}") from None
    write_computation(comp, spath, format, target_version=target_version)


def write_computation(
    comp: XlaComputation,
    spath: str,
    format: Format | str | None = None,
    *,
    target_version: str | None = None,
    check: Callable[[str], object] | None = None,
) -> Format:
    """:func:`save_computation`, with ``check(temporary_path)`` called on the complete file before
    it replaces ``spath`` (an exception from ``check`` leaves ``spath`` untouched and passes
    through). Returns the format written."""
    fmt = save_format(spath, format, target_version)
    data = computation_bytes(comp, fmt, target_version=target_version, what=f"save({spath!r})")
    try:
        _atomic_write(spath, data, check)
    except OSError as e:
        raise FormatError(f"save({spath!r}): cannot write the file: {e.strerror or e}") from None
    return fmt
