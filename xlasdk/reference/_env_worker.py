"""The other side of :class:`~xlasdk.reference._other_env.OtherEnvironment`: runs in a subprocess
under another Python environment (another jaxlib / libtpu), started by the bootstrap of
:mod:`._other_env`, which has already checked that environment's jaxlib is in xlasdk's range.

It reads ``request.json`` (the module file's name, the device, the XLA options, the inputs'
types and shapes) and ``inputs.npz`` (each input's bytes) from the private directory it is given,
compiles and runs the module there, and writes ``outputs.npz`` and then ``result.json`` (its
versions, the outputs' types and shapes, or the error XLA gave). Arrays travel as their raw bytes
(``uint8``) beside their type's name, so bf16 and the fp8 types need no pickling.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

__all__ = ["main", "pack", "unpack"]


def pack(arrays: list[Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``arrays`` as ``{"a0": uint8 bytes, ...}`` and their types and shapes (for ``np.savez``)."""
    import numpy as np

    blobs: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for k, a in enumerate(arrays):
        a = np.array(a, order="C", copy=True)  # ascontiguousarray would make a scalar 1-d
        blobs[f"a{k}"] = a.reshape(-1).view(np.uint8) if a.size else np.zeros(0, np.uint8)
        rows.append({"dtype": a.dtype.name, "shape": list(a.shape)})
    return blobs, rows


def unpack(path: str, rows: list[dict[str, Any]]) -> list[Any]:
    """The arrays :func:`pack` described by ``rows``, read from the .npz ``path`` (no pickles).

    Raises ValueError for bytes that do not make an array of the row's type and shape."""
    import ml_dtypes  # noqa: F401 - registers bfloat16 and the fp8 types with numpy
    import numpy as np

    out = []
    with np.load(path, allow_pickle=False) as z:
        for k, row in enumerate(rows):
            dt, shape = np.dtype(str(row["dtype"])), tuple(int(d) for d in row["shape"])
            raw = np.asarray(z[f"a{k}"])
            if raw.dtype != np.uint8 or raw.ndim != 1:
                raise ValueError(f"array {k}: {raw.dtype}{list(raw.shape)}, expected raw bytes")
            out.append(raw.view(dt).reshape(shape) if raw.size else np.zeros(shape, dt))
    return out


def _write_result(directory: str, doc: dict[str, Any]) -> None:
    tmp = os.path.join(directory, "result.json.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, os.path.join(directory, "result.json"))


def main(directory: str, info: dict[str, Any]) -> int:
    """Compile and run the request in ``directory``; ``info``: the bootstrap's versions (echoed)."""
    import numpy as np

    with open(os.path.join(directory, "request.json")) as f:
        req = json.load(f)
    doc: dict[str, Any] = {**info, "token": req["token"]}
    inputs = unpack(os.path.join(directory, "inputs.npz"), req["inputs"])
    with open(os.path.join(directory, req["module"])) as f:
        text = f.read()
    if req.get("optimized"):
        return _optimized(directory, doc, text, str(req["optimized"]), dict(req["overrides"]))
    try:
        from ..program.computation import XlaComputation
        from ..runtime import CompileOptions
        from ..runtime import compile as _compile
        from ._settings import resolve_device

        comp = XlaComputation.from_hlo_text(text)
        overrides = dict(req["overrides"])
        options = CompileOptions(env_option_overrides=overrides) if overrides else None
        device = resolve_device(req["device"]) if req["device"] else None
        out = _compile(comp, device, options=options)(*inputs)
        got = [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]
    except Exception as e:  # noqa: BLE001 - XLA's own answer in this environment, handed back as such
        doc["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:2000]}"
        _write_result(directory, doc)
        return 0
    blobs, rows = pack(got)
    np.savez(os.path.join(directory, "outputs.npz"), **blobs)
    doc["outputs"] = rows
    _write_result(directory, doc)
    return 0


def _optimized(directory: str, doc: dict[str, Any], text: str, target: str, overrides: dict[str, Any]) -> int:
    """The optimized HLO of ``text`` for ``target`` (a TPU topology's name, or ``cpu``) written to
    ``optimized.hlo`` and named in the result, or XLA's error."""
    try:
        from ..program.computation import XlaComputation
        from ._optimized_diff import optimized_hlo_here

        comp = XlaComputation.from_hlo_text(text)
        hlo = optimized_hlo_here(comp, None if target == "cpu" else target, overrides)
    except Exception as e:  # noqa: BLE001 - XLA's own answer in this environment, handed back as such
        doc["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:2000]}"
        _write_result(directory, doc)
        return 0
    with open(os.path.join(directory, "optimized.hlo"), "w") as f:
        f.write(hlo)
    doc["optimized"] = "optimized.hlo"
    _write_result(directory, doc)
    return 0


if __name__ == "__main__":  # pragma: no cover - started by the bootstrap, never run as a script
    sys.exit(2)
