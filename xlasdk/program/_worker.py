"""The worker-process services of a loaded program: every XLA/MLIR step its computation takes
again in the user's process runs first in the worker.

A computation loaded from a file (:mod:`xlasdk.formats`) holds bytes that xlasdk did not check
op by op; XLA and MLIR abort the process on some of them. The functions named ``*_in_worker``
run in :mod:`xlasdk._jaxlib.isolated`'s child process and perform a step the computation will
then repeat here (printing its module, XLA's proto reader, the StableHLO -> HLO conversion); the
parent functions call them and turn a clean failure or a death into :class:`~xlasdk.FormatError`.
:mod:`xlasdk.formats.untrusted` runs the loads themselves the same way (:func:`_in_worker_once`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .. import _metadata
from .._jaxlib import isolated
from .._jaxlib import mlir as _mlir
from ..errors import FormatError, XlaSdkError
from . import load_cache
from .diagnostics import _one_line

_Failed = isolated.Failed

#: ``(name, value)`` of each module attribute a loaded HLO module gets from its header
ModuleAttributes = tuple[tuple[str, int], ...]


def loaded_module(bytecode: bytes, attributes: ModuleAttributes) -> Any:
    """The module :func:`~xlasdk.formats.untrusted.load_hlo_in_worker` verified, parsed from its
    bytecode, with its header's attributes (the same steps, in the same order, as the worker took)."""
    module = _mlir.parse_module(bytecode)
    if attributes:
        _mlir.set_missing_int_attributes(module, dict(attributes))
    return module


def module_text_in_worker(bytecode: bytes, attributes: ModuleAttributes) -> str:
    """The generic text (with locations) of a module :func:`~xlasdk.formats.untrusted.load_hlo_in_worker` handed back as
    bytecode; runs in the worker."""
    return _mlir.module_to_text(loaded_module(bytecode, attributes), debug_info=True, generic=True)


def module_text(bytecode: bytes, attributes: ModuleAttributes, name: str) -> str:
    """:func:`module_text_in_worker` run in the worker, once per module (:mod:`.load_cache`).

    Raises
    ------
    FormatError
        MLIR's printer failed or died on the module (not expected of a verified module).
    """
    what = repr(name)
    key_data = bytecode + repr(attributes).encode()
    try:
        text: str = _in_worker_once("module_text_in_worker", "bytecode", (bytecode, attributes), key_data, what,
                                    "printing the module", "MLIR's printer crashed on this module",
                                    lambda r: isinstance(r, str))
    except isolated.Failed as e:
        raise FormatError(f"{what}: cannot print the module: {e.message}") from None
    return text


def hlo_proto_in_worker(proto: bytes) -> bool:
    """XLA's reader and printer on a loaded module's ``HloModuleProto`` (from
    :func:`~xlasdk.formats.untrusted.load_hlo_in_worker`): what the user's process does with it when it first needs the
    module as an ``XlaComputation`` (its HLO text, its proto, XLA's HLO graph); runs in the worker."""
    try:
        _mlir.hlo_text(_mlir.xla_computation_from_proto(proto))
    except Exception as e:
        raise _Failed("proto", _one_line(e)) from None
    return True


def check_hlo_proto(proto: bytes, name: str) -> None:
    """:func:`hlo_proto_in_worker` run in the worker, once per proto (:mod:`.load_cache`).

    Raises
    ------
    FormatError
        XLA rejected the proto or died on it (not expected of a proto XLA wrote itself).
    """
    what = repr(name)
    try:
        _in_worker_once("hlo_proto_in_worker", "proto", (proto,), proto, what, "reading the module's HLO",
                        "XLA aborted while reading the module's HLO", lambda r: r is True)
    except isolated.Failed as e:
        raise FormatError(f"{what}: XLA cannot read the module's HLO: {e.message}") from None


def converted_hlo_in_worker(text: str) -> bytes:
    """XLA's StableHLO -> HLO conversion of a loaded module's text (with the metadata fields the
    converter drops written back), as a serialized ``HloModuleProto``; runs in the worker."""
    marked = _metadata.mark_locations(text)
    try:
        if marked is None:
            proto = _mlir.hlo_proto(_mlir.module_to_hlo(text))
        else:
            proto = _mlir.hlo_proto_with_metadata(*marked)
    except Exception as e:
        raise _Failed("convert", _one_line(e)) from None
    try:  # what the user's process does with it next: read it, print it
        xla = _mlir.xla_computation_from_proto(proto)
        _mlir.hlo_text(xla)
    except Exception as e:
        raise _Failed("convert", _one_line(e)) from None
    return proto


def converted_hlo_proto(text: str, name: str) -> bytes:
    """:func:`converted_hlo_in_worker` run in the worker.

    Raises
    ------
    RuntimeError
        XLA's converter rejected the module or died on it (the caller makes it a CompileError).
    """
    try:
        proto: bytes = isolated.request(f"{__name__}:converted_hlo_in_worker", text)
    except isolated.Failed as e:
        raise RuntimeError(e.message) from None
    except isolated.WorkerDied as e:
        if e.killed:
            raise RuntimeError(f"converting {name!r} to HLO was stopped: {e.reason}") from None
        raise RuntimeError(f"XLA aborted while converting {name!r} to HLO ({e.reason})") from None
    return proto


def load_timeout(data: str | bytes) -> float:
    """Seconds a load may take in the worker before it is killed as hung: ``XLASDK_LOAD_TIMEOUT``
    if set, else 120 s plus 60 s per MB of input (MLIR's bytecode reader spins forever on some
    corrupt bytes; a 100,000-instruction HLO dump loads in about 10 s on a busy 2-core machine)."""
    env = os.environ.get("XLASDK_LOAD_TIMEOUT")
    if env:
        try:
            value = float(env)
        except ValueError:
            value = 0.0
        if value > 0:
            return value
    return 120.0 + 60.0 * len(data) / 1e6


def _hung(what: str, doing: str, seconds: float) -> FormatError:
    return FormatError(
        f"{what}: {doing} did not finish within {seconds:g} s and was stopped (corrupt input makes "
        "MLIR's and XLA's readers spin; XLASDK_LOAD_TIMEOUT sets the limit)"
    )


def _in_worker(fn: str, args: tuple[Any, ...], data: str | bytes, what: str, doing: str, crashed: str,
               module: str = __name__) -> Any:
    """``fn(*args)`` of ``module`` (this one unless named) run in the worker within
    :func:`load_timeout` of ``data``; a worker that dies raises FormatError naming ``what``:
    :func:`_hung` doing ``doing`` when it ran past the limit, else ``crashed`` and the reason."""
    limit = load_timeout(data)

    def died(e: isolated.WorkerDied) -> XlaSdkError:
        if e.timed_out:
            return _hung(what, doing, limit)
        if e.unavailable:  # no worker to ask: nothing about the file is known
            return XlaSdkError(f"{what}: {doing} could not begin: {e.reason}; nothing is known about the file "
                               "itself (XLA did not read it)")
        if e.killed:  # not the file's fault: say so, not "XLA aborted"
            return FormatError(f"{what}: {doing} was stopped: {e.reason}")
        return FormatError(f"{what}: {crashed} ({e.reason})")

    try:
        return isolated.request(f"{module}:{fn}", *args, timeout=limit, on_death=died)
    except isolated.Failed as e:
        if e.stage == "memory":  # the worker's budget, not the file's fault: no "syntax error"
            raise FormatError(f"{what}: {doing} was stopped: {e.message}") from None
        raise
    except isolated.WorkerDied as e:
        raise died(e) from None


def _in_worker_once(fn: str, kind: str, args: tuple[Any, ...], data: str | bytes, what: str, doing: str,
                    crashed: str, fits: Callable[[Any], bool], module: str = __name__) -> Any:
    """:func:`_in_worker`, unless these very bytes of ``kind`` went through ``fn`` before: then what
    it gave (:mod:`.load_cache`, keyed by ``fn``'s name; ``fits`` says whether a kept record has the
    result's form)."""
    k = load_cache.key(fn, kind, data)
    known = load_cache.lookup(k)
    if known is not None and fits(known):
        return known
    result = _in_worker(fn, args, data, what, doing, crashed, module)
    load_cache.remember(k, result)
    return result
