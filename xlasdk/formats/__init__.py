"""Reading and writing computations in every XLA file format.

=============================  ==============================  ===================================
suffix                         format                          written by
=============================  ==============================  ===================================
``.hlo``, ``.hlo.txt``,        HLO text                        ``comp.as_hlo_text()``, XLA dumps
``.txt``                                                       (``*.before_optimizations.txt``)
``.mlir``                      StableHLO text (MLIR)           ``comp.as_stablehlo_text()``
``.mlirbc``                    StableHLO portable artifact     ``comp.serialize_portable_artifact()``
                               (MLIR bytecode also loads)
``.pb``, ``.hlo.pb``           ``HloModuleProto`` (XLA dumps'  ``comp.as_serialized_hlo_module_proto()``
                               ``HloProto`` / ``HloSnapshot``
                               wrappers also load)
=============================  ==============================  ===================================

:func:`load_computation` picks the format from the suffix; for ``.txt`` and unknown suffixes it
recognises the format from the content. Whatever the input, a bad file raises
:class:`~xlasdk.FormatError` naming the file and what was wrong, never a crash: XLA's HLO text
parser and its HLO -> StableHLO importer abort the process on some inconsistent modules
(a ``reshape`` that changes the element count, a ``get-tuple-element`` out of range, a
``conditional`` branch of the wrong arity...), so HLO is first checked here, in Python, for the
inconsistencies known to crash XLA; everything loaded is then verified by the MLIR verifier.
MLIR's bytecode reader can crash on corrupt bytes, so bytecode this process did not write itself
is decoded in xlasdk's worker process first (which starts once per process, in about 1 s; a few
milliseconds per file after that).

Optimized HLO (XLA's ``*after_optimizations*`` dumps) loads too: for the StableHLO import,
``fusion`` instructions become calls of their fused computations and ``bitcast`` instructions
become reshapes/transposes; ``as_hlo_text()`` still prints the module as it was loaded.

Modules of this package (the names of ``__all__`` below are re-exported here; ``text_proto`` and
``debug_options`` serve the loaders and the CLI). The program model they load into and save from
(the computation, a module's instruction graph and its edits, the program shape, the worker's
services and load records) is :mod:`xlasdk.program`: its computation class sits between this
package's readers (below it) and ``load`` and ``snapshot`` (above it):

=====================  ========================================================================
``sniff``              :class:`Format`, file suffixes, recognising a format from the content
``protobuf``           the protobuf wire-format walker that finds an ``HloModuleProto``
``hlo_text``           the small HLO text parser; :func:`hlo_opcode_counts`
``hlo_check``          :func:`check_hlo_text`: rejects HLO that XLA's parser/importer abort on
``hlo_rewrite``        optimized HLO made importable (``fusion`` -> ``call``, ``bitcast``)
``artifact``           portable artifact versions and serialization
``jax_export``         ``jax.export`` files (``Exported.serialize()``): :func:`read_jax_export`
``untrusted``          loading bytes xlasdk did not write: every XLA/MLIR step first in the worker
``hlo_names``          a module loaded from HLO: its instructions' HLO names, read in the worker
``rule_check``         the builder's shape rules on a loaded module's ops
``tpu_meaning``        XLA's TPU-optimized HLO read as its CPU meaning
``snapshot``           XLA's ``HloSnapshot`` files (module, arguments, result): :func:`load_snapshot`
``text_proto``         text-format protos of XLA's messages (``HloSnapshot``...) to their binary form
``debug_options``      the compiler options an XLA dump was made with (``*.debug_options``)
``loaders``            each format's text or bytes read and checked: a computation's parts
``saving``             :func:`computation_bytes`, :func:`save_computation`
``load``               ``computation_from_*``, :func:`load_computation` (above the program model:
                       they make computations of what ``loaders`` reads)
=====================  ========================================================================
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below import their modules on first use (PEP 562): the CLI's loads need few
    from .artifact import portable_artifact_version, serialize_portable_artifact
    from .hlo_check import check_hlo_text
    from .hlo_text import hlo_opcode_counts
    from .jax_export import JaxExport, read_jax_export
    from .load import (
        computation_from_hlo_proto,
        computation_from_hlo_text,
        computation_from_stablehlo,
        load_computation,
    )
    from .saving import computation_bytes, save_computation
    from .snapshot import Snapshot, load_snapshot, read_snapshot, write_snapshot
    from .sniff import Format, PathLike, format_from_suffix, sniff_format

#: public name -> its module in this package
_LAZY: dict[str, str] = {
    "portable_artifact_version": "artifact",
    "serialize_portable_artifact": "artifact",
    "check_hlo_text": "hlo_check",
    "hlo_opcode_counts": "hlo_text",
    "JaxExport": "jax_export",
    "read_jax_export": "jax_export",
    "load_computation": "load",
    "computation_from_hlo_proto": "load",
    "computation_from_hlo_text": "load",
    "computation_from_stablehlo": "load",
    "computation_bytes": "saving",
    "save_computation": "saving",
    "Snapshot": "snapshot",
    "load_snapshot": "snapshot",
    "read_snapshot": "snapshot",
    "write_snapshot": "snapshot",
    "Format": "sniff",
    "PathLike": "sniff",
    "format_from_suffix": "sniff",
    "sniff_format": "sniff",
}

__all__ = [
    "Format",
    "load_computation",
    "save_computation",
    "computation_bytes",
    "format_from_suffix",
    "sniff_format",
    "computation_from_hlo_text",
    "computation_from_stablehlo",
    "computation_from_hlo_proto",
    "portable_artifact_version",
    "serialize_portable_artifact",
    "check_hlo_text",
    "hlo_opcode_counts",
    "PathLike",
    "JaxExport",
    "read_jax_export",
    "Snapshot",
    "load_snapshot",
    "read_snapshot",
    "write_snapshot",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562), and keep the value here."""
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``__all__``) and the submodules imported so far."""
    prefix = __name__ + "."
    subs = {n for n, v in globals().items() if isinstance(v, type(importlib)) and v.__name__.startswith(prefix)}
    return sorted(set(__all__) | subs)
