"""StableHLO portable artifacts: reading their version, writing them for the oldest version that holds the module.

Also keeps the hashes of the artifacts this process wrote itself (:data:`_TRUSTED_BYTECODE`),
which the loader may decode in-process instead of in a child process.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

from .._jaxlib import mlir as _mlir
from ..errors import FormatError
from .sniff import _BYTECODE_MAGIC

if TYPE_CHECKING:
    from ..program.computation import XlaComputation


# sha256 of bytecode this process wrote itself (safe to decode in-process); the rest is decoded
# in a child process first, because MLIR's bytecode reader can crash on corrupt input.
_TRUSTED_BYTECODE: OrderedDict[bytes, None] = OrderedDict()
_TRUSTED_MAX: Final = 1024


def _trust(data: bytes) -> None:
    _TRUSTED_BYTECODE[hashlib.sha256(data).digest()] = None
    while len(_TRUSTED_BYTECODE) > _TRUSTED_MAX:
        _TRUSTED_BYTECODE.popitem(last=False)


def portable_artifact_version(data: bytes) -> str | None:
    """The StableHLO version a portable artifact was written for (``"1.9.0"``), or None.

    Read from the bytecode header's producer string (``StableHLO_v1.9.0``); None for plain MLIR
    bytecode and anything else.
    """
    if not data.startswith(_BYTECODE_MAGIC):
        return None
    m = re.match(rb"StableHLO_v(\d+\.\d+\.\d+)\x00", data[5:40])
    return m.group(1).decode() if m else None


# -- portable artifacts ---------------------------------------------------------------------------
_VERSION_RE: Final = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_REQUIREMENTS: Final = ("NONE", "WEEK_4", "WEEK_12", "MAX")


def _vtuple(v: str) -> tuple[int, int, int]:
    m = _VERSION_RE.match(v)
    assert m is not None
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def _candidate_versions(lo: str, hi: str) -> list[str]:
    """Every version string between ``lo`` and ``hi`` on a grid wide enough to hold real releases."""
    lo_t, hi_t = _vtuple(lo), _vtuple(hi)
    out: list[str] = []
    for major in range(lo_t[0], hi_t[0] + 1):
        for minor in range(100):
            for patch in range(50):
                v = (major, minor, patch)
                if lo_t <= v <= hi_t:
                    out.append(f"{major}.{minor}.{patch}")
    return out


def _try_serialize(module: Any, version: str) -> bytes | None:
    try:
        return _mlir.serialize_portable_artifact(module, version)
    except Exception:
        return None


def _foreign_ops(module: Any) -> list[str]:
    text = _mlir.module_to_text(module, debug_info=False, generic=True)
    return sorted(set(re.findall(r'"((?:mhlo|sdy|mpmd)\.[\w.]+)"', text)))


def serialize_portable_artifact(
    comp: XlaComputation, target_version: str | None = None, *, what: str = "serialize_portable_artifact"
) -> bytes:
    """The computation as a StableHLO portable artifact (see ``XlaComputation`` for the contract)."""
    data = _serialize_portable_artifact(comp, target_version, what)
    _trust(data)
    return data


def _serialize_portable_artifact(comp: XlaComputation, target_version: str | None, what: str) -> bytes:
    module = comp.compiler_ir()
    current = _mlir.stablehlo_current_version()
    minimum = _mlir.stablehlo_minimum_version()
    if target_version is None:
        data = _try_serialize(module, minimum)
        if data is not None:
            return data
        full = _try_serialize(module, current)
        if full is None:
            raise FormatError(f"{what}: {_cannot_serialize(module, current)}")
        cands = _candidate_versions(minimum, current)
        lo, hi = 0, len(cands) - 1  # cands[hi] works (current), cands[0] does not
        best = full
        while hi - lo > 1:
            mid = (lo + hi) // 2
            got = _try_serialize(module, cands[mid])
            if got is not None:
                hi, best = mid, got
            else:
                lo = mid
        return best
    if not isinstance(target_version, str):
        raise FormatError(f"{what}: target_version must be a string like '1.9.0', got {target_version!r}")
    v = target_version.strip()
    if v.upper() in _REQUIREMENTS:
        v = _mlir.stablehlo_version_for(v.upper())
    elif v.lower() == "current":
        v = current
    elif v.lower() in ("minimum", "oldest"):
        v = minimum
    if not _VERSION_RE.match(v):
        raise FormatError(
            f"{what}: {target_version!r} is not a StableHLO version; use MAJOR.MINOR.PATCH between {minimum} "
            f"and {current} (or WEEK_4, WEEK_12, MAX, current)"
        )
    if _vtuple(v) < _vtuple(minimum):
        raise FormatError(f"{what}: StableHLO {v} is older than the oldest version this jaxlib writes ({minimum})")
    if _vtuple(v) > _vtuple(current):
        raise FormatError(f"{what}: StableHLO {v} is newer than this jaxlib's current version ({current})")
    try:
        return _mlir.serialize_portable_artifact(module, v)
    except Exception as e:
        err = str(e)
    if _try_serialize(module, current) is None:
        raise FormatError(f"{what}: {_cannot_serialize(module, current)}")
    m = re.search(r"failed to legalize operation '([\w.]+)'", err)
    op = f" ({m.group(1)} is newer)" if m else ""
    oldest = _oldest_version(module, v, current)
    raise FormatError(
        f"{what}: StableHLO {v} cannot hold every op of this module{op}; the oldest version that can is {oldest}"
    )


def _oldest_version(module: Any, lo: str, hi: str) -> str:
    cands = _candidate_versions(lo, hi)
    a, b = 0, len(cands) - 1
    while b - a > 1:
        mid = (a + b) // 2
        if _try_serialize(module, cands[mid]) is not None:
            b = mid
        else:
            a = mid
    return cands[b]


def _cannot_serialize(module: Any, current: str) -> str:
    foreign = _foreign_ops(module)
    if foreign:
        return (
            f"the module uses ops that are not StableHLO ({', '.join(foreign[:5])}), which a portable artifact "
            "cannot hold; save it as .mlir, .hlo or .pb instead"
        )
    return f"the module cannot be serialized as a StableHLO {current} portable artifact"
