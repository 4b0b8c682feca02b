"""The HLO instruction names of a module loaded from HLO, for its instruction graph.

A module loaded from HLO text or a proto is XLA's HLO -> StableHLO import of it, and the importer
names no op: it puts each instruction's ``metadata.op_name`` in the op's location, and only an
instruction without an ``op_name`` gets its own name there (``loc("dot.3")``, see XLA's
``GenerateInstructionLocation``). To walk a dump by the names it prints (``%dot.3``),
:func:`hlo_names` imports a second copy of the module whose instructions carry no metadata, so
that every op's location is the name of the instruction it came from, and returns those names in
the order of ``main``'s arguments and ops; :func:`xlasdk.program.graph_import.import_graph` pairs
them with the ops of the module the computation holds (the same import of the same module, only
its metadata differs).

The second import runs in the worker process (:mod:`xlasdk._jaxlib.isolated`), like every step
of a load: XLA's importer aborts the process on some modules. Its result is remembered by content
(:mod:`.load_cache`). The loader gives each computation it makes from HLO :func:`hlo_names`
to read them with when its instruction graph is first needed (the program model, one layer below,
does not import this module).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .. import _metadata
from .._jaxlib import isolated
from .._jaxlib import mlir as _mlir
from ..errors import XlaSdkError
from ..program import load_cache
from ..program._worker import load_timeout
from .untrusted import importable_text

if TYPE_CHECKING:
    from ..program.graph_import import HloNames

__all__ = ["hlo_names", "hlo_names_in_worker"]

_NAME_LOC = re.compile(r'^loc\("([^"\\]*)"\)$')


def _name(loc: str) -> str:
    m = _NAME_LOC.match(loc)
    return m.group(1) if m else ""


_Record = tuple[tuple[str, ...], tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]


def hlo_names_in_worker(proto: bytes) -> _Record:
    """``(args, ops, opcodes)`` of :class:`~xlasdk.program.graph_import.HloNames` (``opcodes`` as
    pairs: the names of ``args`` and ``ops`` only) for a verified ``HloModuleProto``; runs in the worker.

    The module is imported as the loader imported it (:func:`xlasdk.formats.untrusted.load_hlo_in_worker`:
    an optimized module rewritten first), its metadata cleared.
    """
    from .._jaxlib import mlir_graph as _mg  # the MLIR walk: only where the names are read

    try:
        hm = _mlir.hlo_module_from_proto(proto)
        opcodes = _mlir.hlo_instruction_opcodes(hm)
        # the optimized-module rewrite reads the text without metadata: half the text, half the time
        rewritten, _ = importable_text(hm, _mlir.hlo_module_to_text(hm, metadata=False))
        if rewritten is not None:
            proto = _mlir.hlo_module_to_proto(_mlir.hlo_module_from_text(rewritten))
        module = _mlir.parse_module(_mlir.hlo_proto_to_stablehlo(_metadata.without_metadata(proto)))
        args, ops = _mg.main_locations(module)
    except Exception as e:
        raise isolated.Failed("names", str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    arg_names = tuple(_name(a) for a in args)
    op_names = tuple((n, _name(loc)) for n, loc in ops)
    wanted = {*arg_names, *(n for _, n in op_names)}
    return arg_names, op_names, tuple((n, c) for n, c in opcodes.items() if n in wanted)


def hlo_names(proto: bytes) -> HloNames | None:
    """The :class:`~xlasdk.program.graph_import.HloNames` of a verified ``HloModuleProto`` (one the
    loader's worker carried through the import), read in the worker; None when the worker could not
    (the instruction graph then keeps its own names)."""
    k = load_cache.key("hlo_names_in_worker", "proto", proto)
    got = load_cache.lookup(k)
    if not _fits(got):
        try:
            got = isolated.request("xlasdk.formats.hlo_names:hlo_names_in_worker", proto, timeout=load_timeout(proto),
                                   on_death=_names_died)
        except (isolated.Failed, isolated.WorkerDied):
            return None
        if not _fits(got):
            return None
        load_cache.remember(k, got)
    from ..program.graph_import import HloNames  # the names are read for the graph's import

    args, ops, opcodes = got
    return HloNames(tuple(args), tuple(ops), dict(opcodes))


def _names_died(e: isolated.WorkerDied) -> XlaSdkError:
    """What a process that reads the names itself (:mod:`xlasdk._jaxlib.isolated_local`) reports when
    XLA ends it there (the worker's death only costs the names)."""
    doing = "was stopped" if e.killed else "failed: XLA aborted"
    return XlaSdkError(f"reading the loaded module's instruction names {doing} ({e.reason})")


def _fits(got: object) -> bool:
    """Whether ``got`` has the form :func:`hlo_names_in_worker` returns."""
    def pairs(x: object) -> bool:
        return isinstance(x, tuple) and all(
            isinstance(o, tuple) and len(o) == 2 and all(isinstance(v, str) for v in o) for o in x)

    return (
        isinstance(got, tuple) and len(got) == 3 and isinstance(got[0], tuple)
        and all(isinstance(a, str) for a in got[0]) and pairs(got[1]) and pairs(got[2])
    )
