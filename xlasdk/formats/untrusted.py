"""Loading files that xlasdk did not write: every XLA/MLIR step runs first in the worker process.

XLA's HLO parser and importer and MLIR's parsers abort the process (``CHECK`` failures, native
stack overflows) on inputs that a user can have in a file. The functions named ``*_in_worker``
run in :mod:`xlasdk._jaxlib.isolated`'s child process and perform, on the very bytes the user
gave, every native step the loader will then repeat in the user's process; the parent functions
call them and turn a clean failure or a death into :class:`~xlasdk.FormatError`. Only bytes that
the worker has carried through every step reach XLA or MLIR in the user's process. What a loaded
computation asks of the worker later (its module's text, XLA's proto reader, the conversion to HLO)
is :mod:`xlasdk.program._worker`'s, which runs these loads too
(:func:`~xlasdk.program._worker._in_worker_once`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .._jaxlib import isolated
from .._jaxlib import mlir as _mlir
from .._jaxlib.per_partition import SPMD_PARTITIONS
from ..errors import FormatError
from ..program._worker import ModuleAttributes, _in_worker_once
from ..program.diagnostics import _mlir_problem, _one_line, _xla_text_problem
from ..program.program_shape import _program_shape
from ..sharding._spmd import hlo_header_counts, spmd_partitions
from .hlo_check import check_hlo_claims
from .hlo_rewrite import _importable_hlo, explicit_replica_groups
from .rule_check import RuleViolation, check_rules
from .tpu_meaning import NoCpuMeaning, cpu_meaning, untiled_layouts

if TYPE_CHECKING:
    from ..shape import ProgramShape

_Failed = isolated.Failed


# -- run in the worker -------------------------------------------------------------------------
#: ``(instructions rewritten, the signs)`` of a TPU-optimized module run as its CPU meaning
#: (:mod:`.tpu_meaning`), or None for any other module
TpuNote = tuple[int, str] | None


def load_hlo_in_worker(
    kind: str, data: str | bytes, what: str
) -> tuple[bytes, bytes, str, ProgramShape, ModuleAttributes, TpuNote]:
    """(``HloModuleProto``, the imported StableHLO module as MLIR bytecode, module name, program
    shape, module attributes from the HLO header, :data:`TpuNote`) of HLO text or a proto.

    The bytecode is the importer's own output, the very bytes parsed and verified here: the
    user's process may parse them again (and give the module the same attributes) without a
    step the worker has not taken. The module's text is printed only when it is needed
    (:func:`~xlasdk.program._worker.module_text`).

    Every native step the user's process takes with the result on load is run here: XLA's
    parser, the proto round trip, the optimized-HLO rewrite, the StableHLO import and MLIR's
    verifier, the program shape. XLA's reader of the returned proto (an
    ``XlaComputation``, for the HLO printer) is not: most loads never need it, and it costs about
    0.7x XLA's parse; :func:`~xlasdk.program._worker.check_hlo_proto` runs it here first when the
    user's process does.
    """
    if kind == "text":
        assert isinstance(data, str)
        try:
            hm = _mlir.hlo_module_from_text(data)
        except Exception as e:
            raise _Failed("syntax", _xla_text_problem(e)) from None
        text = data
    else:
        assert isinstance(data, bytes)
        try:
            hm = _mlir.hlo_module_from_proto(data)
        except Exception as e:
            raise _Failed("proto", _one_line(e)) from None
        text = _mlir.hlo_module_to_text(hm)
    proto = _mlir.hlo_module_to_proto(hm)
    name = str(hm.name)
    import_proto = proto
    rewritten, tpu = importable_text(hm, text)
    if rewritten is not None:  # an optimized module: fusions and bitcasts in StableHLO terms
        try:
            import_proto = _mlir.hlo_module_to_proto(_mlir.hlo_module_from_text(rewritten))
        except Exception as e:
            raise _Failed("rewrite", _xla_text_problem(e)) from None
    try:
        bc = _mlir.hlo_proto_to_stablehlo(import_proto)
    except Exception as e:
        raise _Failed("import", _one_line(e)) from None
    try:
        module = _parse_verified(bc, "hlo")
    except _Failed as e:
        raise _Failed(e.stage, _named_verifier_problem(import_proto) or e.message) from None
    _check_rules(module, text)
    counts = _header_counts(text)
    if counts:  # XLA's import drops them; JAX's StableHLO lowerings carry them as module attributes
        _mlir.set_missing_int_attributes(module, counts)
    try:
        program_shape = _program_shape(module, what)
    except FormatError as e:
        raise _Failed("format", str(e)) from None
    return proto, bc, name, program_shape, tuple(sorted(counts.items())), tpu


def _named_verifier_problem(proto: bytes) -> str | None:
    """MLIR's verifier message for an imported HLO module, each error at the instruction it is
    about: XLA's importer names an op after its instruction only when the instruction has no
    ``op_name`` (else the location is the op_name and the Python stack), so the module is imported
    again without metadata (:func:`xlasdk._metadata.without_metadata`). None when that import
    verifies or fails otherwise (the first message then stands)."""
    from .._metadata import without_metadata

    try:
        bc = _mlir.hlo_proto_to_stablehlo(without_metadata(proto))
        _mlir.parse_module(bc)
    except Exception as e:
        problem = _mlir_problem(e, "hlo")
        return problem if problem.startswith("instruction ") else None
    return None


def importable_text(hm: Any, text: str) -> tuple[str | None, TpuNote]:
    """The HLO text XLA's importer takes for a parsed module ``hm`` of ``text`` (None: ``text``
    as it is), and its :data:`TpuNote`: a TPU-optimized module's CPU meaning
    (:func:`~.tpu_meaning.cpu_meaning`, read from XLA's print of ``hm``), fusions as calls and
    bitcasts in StableHLO terms (:func:`~.hlo_rewrite._importable_hlo`), replica groups over mesh
    axes as the groups they name (:func:`~.hlo_rewrite.explicit_replica_groups`). Runs in the worker.

    Raises
    ------
    isolated.Failed
        ``"tpu"``: an instruction of a TPU-optimized module without a CPU meaning; ``"rewrite"``:
        replica groups over mesh axes that name no groups of their mesh.
    """
    try:
        meaning = cpu_meaning(_mlir.hlo_module_to_text(hm)) if _maybe_tpu(text) else None
    except NoCpuMeaning as e:
        raise _Failed("tpu", str(e)) from None
    if meaning is None:
        return _explicit_groups(_importable_hlo(text), text), None
    # once bitcasts are ops, layouts say nothing about values: none is kept (a non-default one of the
    # entry computation would stay in the import as a result layout that outlives with_outputs' cut)
    importable = untiled_layouts(_importable_hlo(meaning.text) or meaning.text, whole=True)
    return _explicit_groups(importable, text), (meaning.rewritten, meaning.signs.describe())


def _explicit_groups(rewritten: str | None, text: str) -> str | None:
    """``rewritten`` (or ``text`` when it is None) with :func:`~.hlo_rewrite.explicit_replica_groups`
    applied; None when neither changed ``text``."""
    try:
        explicit = explicit_replica_groups(rewritten if rewritten is not None else text)
    except FormatError as e:
        raise _Failed("rewrite", str(e)) from None
    return explicit if explicit is not None else rewritten


def _maybe_tpu(text: str) -> bool:
    """Whether HLO text may be TPU-optimized (a tiled layout or a memory space), without parsing it."""
    return ":T(" in text or re.search(r"[:)]S\(\d+\)", text) is not None


def _header_counts(text: str) -> dict[str, int]:
    """``{"mhlo.num_partitions": N, "mhlo.num_replicas": R}`` from an HLO module's header line
    (``HloModule m, ..., replica_count=2, num_partitions=4``), for the counts above 1 it gives;
    and, for one partition's program (XLA's optimized dump of a program its SPMD partitioner
    split), ``"xlasdk.spmd_partitions"``: its partition count, 0 when it does not say
    (:func:`~xlasdk.sharding._spmd.spmd_partitions`; :mod:`xlasdk._jaxlib.per_partition` reads it)."""
    names = {"num_partitions": "mhlo.num_partitions", "replica_count": "mhlo.num_replicas"}
    counts = {names[k]: v for k, v in hlo_header_counts(text).items() if v > 1}
    partitions = spmd_partitions(text)
    if partitions is not None:
        counts[SPMD_PARTITIONS] = partitions
    return counts


def parse_stablehlo_in_worker(data: str | bytes, kind: str, what: str) -> str:
    """Generic MLIR text (with locations) of StableHLO text (``kind="text"``), MLIR bytecode
    (``"bytecode"``) or a portable artifact (``"artifact"``), parsed and verified here."""
    if kind == "artifact":
        assert isinstance(data, bytes)
        try:
            module = _mlir.deserialize_portable_artifact(data)
        except Exception as e:
            raise _Failed("decode", _one_line(e)) from None
    elif kind == "bytecode":
        try:
            module = _mlir.parse_module(data, verify=False)
        except Exception as e:
            raise _Failed("decode", _one_line(e)) from None
    else:
        module = _parse_verified(data, "text")
    text = _mlir.module_to_text(module, debug_info=True, generic=True)
    if kind != "text":
        module = _parse_verified(text, "bytecode")
    try:
        _check_rules(module, text)
    except _Failed as e:
        message = e.message.removeprefix("instruction ") if e.message.startswith("instruction line ") else e.message
        raise _Failed("format", f"{what}: {message}") from None
    return _check_module(module, what)[1]


def _check_rules(module: Any, text: str) -> None:
    """:func:`~xlasdk.formats.rule_check.check_rules`: an op whose claims the builder's rule
    refuses and XLA's runtime would trust is a ``"rule"`` failure naming the instruction."""
    try:
        check_rules(module, text)
    except RuleViolation as e:
        raise _Failed("rule", f"instruction {e.name}: {e.message} ({e.why})") from None


def _parse_verified(data: str | bytes, kind: str) -> Any:
    try:
        return _mlir.parse_module(data)
    except Exception as e:
        raise _Failed(f"verify-{kind}", _mlir_problem(e, kind)) from None


def _check_module(module: Any, what: str) -> tuple[ProgramShape, str]:
    """The program shape and generic text (with locations) of a verified module."""
    try:
        program_shape = _program_shape(module, what)
    except FormatError as e:
        raise _Failed("format", str(e)) from None
    return program_shape, _mlir.module_to_text(module, debug_info=True, generic=True)


# -- the user's process ------------------------------------------------------------------------
def load_hlo(
    kind: str, data: str | bytes, what: str
) -> tuple[bytes, bytes, str, ProgramShape, ModuleAttributes, TpuNote]:
    """:func:`load_hlo_in_worker` run in the worker.

    Raises
    ------
    isolated.Failed
        A clean failure (``stage`` and XLA's message).
    FormatError
        The worker died on the module: names ``what`` and XLA's ``Check failed:`` line.
        Also when the load ran past :func:`~xlasdk.program._worker.load_timeout` (the worker is then
        replaced) or past the worker's memory budget (:func:`isolated.memory_budget`), and, before the worker sees it,
        for HLO text whose tuples or constants claim more than
        :func:`~xlasdk.formats.hlo_check.check_hlo_claims` allows.
    """
    if kind == "text" and isinstance(data, str):
        check_hlo_claims(data, what)  # before XLA's parser allocates what the text claims
    result: tuple[bytes, bytes, str, ProgramShape, ModuleAttributes, TpuNote] = _in_worker_once(
        "load_hlo_in_worker", kind, (kind, data, what), data, what, "loading the module",
        "XLA aborted while loading this module", lambda r: isinstance(r, tuple) and len(r) == 6, __name__,
    )
    return result


def parse_stablehlo(data: str | bytes, kind: str, what: str) -> str:
    """:func:`parse_stablehlo_in_worker` run in the worker (raises as :func:`load_hlo`)."""
    text: str = _in_worker_once(
        "parse_stablehlo_in_worker", kind, (data, kind, what), data, what, "reading the module",
        "the MLIR parser crashed on this module", lambda r: isinstance(r, str), __name__,
    )
    return text

