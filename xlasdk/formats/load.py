"""``load_computation``: a computation from any file XLA, JAX or xlasdk writes, its format chosen
by the suffix and recognised from the content (:mod:`.loaders` reads each format;
:mod:`.snapshot` and :mod:`.jax_export` the files that wrap a module)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._jaxlib import isolated
from ..errors import FormatError
from .loaders import (
    _from_bytecode,
    _path_name,
    _read,
    computation_from_hlo_proto,
    computation_from_hlo_text,
    computation_from_stablehlo,
)
from .sniff import (
    _BYTECODE_MAGIC,
    _SUFFIX_LIST,
    Format,
    PathLike,
    _as_text,
    _parse_format,
    format_from_suffix,
    jax_exported_hint,
    sniff_format,
    text_snapshot_kind,
)

if TYPE_CHECKING:
    from ..program.computation import XlaComputation

__all__ = ["load_computation"]


def _from_jax_export(data: bytes, what: str) -> XlaComputation:
    """The module of a ``jax.export`` file (:mod:`xlasdk.formats.jax_export`)."""
    from .jax_export import read_jax_export  # imported for such a file only (a plain module's load needs neither)

    info = read_jax_export(data, what)
    return _from_bytecode(info.mlir_module, f"{what} (its jax.export module)")


def load_computation(path: PathLike, format: Format | str | None = None) -> XlaComputation:
    """Load a computation from a file, choosing the format by the suffix.

    Parameters
    ----------
    path:
        ``.hlo`` / ``.hlo.txt`` (HLO text), ``.mlir`` (StableHLO text), ``.mlirbc`` (StableHLO
        portable artifact or MLIR bytecode), ``.pb`` (``HloModuleProto``, or the ``HloProto``
        XLA's dumps write). For ``.txt`` and any other suffix the format is recognised from the
        content, so XLA dump files such as ``module_0000.main.before_optimizations.txt`` load as
        they are, and so does a ``jax.export`` file (``Exported.serialize()``, any suffix): its
        StableHLO module, with the shardings and ``num_partitions`` it holds (the file's other
        fields: :func:`xlasdk.formats.read_jax_export`), and a text-format ``HloSnapshot``
        (``*.hlo_unoptimized_snapshot.txt``; its module, like the binary one's:
        :func:`xlasdk.load_snapshot` gives its arguments too).
    format:
        Force a format (``"hlo"``, ``"mlir"``, ``"mlirbc"``, ``"pb"`` or a :class:`Format`).

    Returns
    -------
    XlaComputation
        Compiles, runs, prints and saves like a built one; its program shape comes from the
        module's ``main`` function (HLO tuple parameters and results are flattened).

    Raises
    ------
    FormatError
        If the file is missing, empty, truncated, corrupt, of another format than its suffix
        says, or holds an inconsistent module; the message names the file and the problem.
    """
    what = _path_name(path, "load_computation")
    data = _read(path, what)
    if not data:
        raise FormatError(f"{what}: the file is empty")
    isolated.prestart()  # its start overlaps the checks below
    fmt = _parse_format(format) if format is not None else format_from_suffix(what)
    sniffed = sniff_format(data)
    if sniffed is None and fmt is None and jax_exported_hint(data) is not None:
        return _from_jax_export(data, what)
    if sniffed is None and (hint := jax_exported_hint(data)) is not None:
        raise FormatError(f"{what}: {hint}")
    if sniffed is None and text_snapshot_kind(data) is not None:
        if fmt is not None:
            raise FormatError(f"{what}: the suffix says {fmt.description}, but the file holds a text-format "
                              "HloSnapshot (xs.load_snapshot reads it with its arguments)")
        from .snapshot import read_snapshot

        return read_snapshot(data, what).computation
    if fmt is None:
        if sniffed is None:
            raise FormatError(
                f"{what}: not a recognised computation format (expected HLO text, StableHLO text, a "
                f"portable artifact, an HloModuleProto or a jax.export file; suffixes {_SUFFIX_LIST})"
            )
        fmt = sniffed
    elif sniffed is not None and sniffed is not fmt:
        raise FormatError(
            f"{what}: the suffix says {fmt.description}, but the file holds {sniffed.description}"
        )
    if fmt is Format.HLO_TEXT:
        text = _as_text(data)
        if text is None:
            raise FormatError(f"{what}: not HLO text (binary data, or not UTF-8)")
        return computation_from_hlo_text(text, what)
    if fmt is Format.STABLEHLO_TEXT:
        text = _as_text(data)
        if text is None:
            raise FormatError(f"{what}: not StableHLO text (binary data, or not UTF-8)")
        return computation_from_stablehlo(text, what)
    if fmt is Format.PORTABLE_ARTIFACT:
        if not data.startswith(_BYTECODE_MAGIC):
            raise FormatError(f"{what}: not a StableHLO portable artifact (no 'ML\\xefR' bytecode header)")
        return _from_bytecode(data, what)
    return computation_from_hlo_proto(data, what)
