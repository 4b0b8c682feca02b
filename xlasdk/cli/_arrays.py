"""Arrays in and out of ``xlasdk run``: .npy / .npz inputs (ml_dtypes types as raw bytes), random
inputs, the --output entries and the printed summaries.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._common import UsageError
from ._npfiles import MAX_MANIFEST_BYTES, NpyArray, npy_file, npz_members
from ._verbs import add_input_arguments as add_input_arguments  # the parser lives in the light _verbs

# -- run: arrays in and out ------------------------------------------------------------------------
# numpy has no bf16, fp8, int4 or int2: ml_dtypes adds them, and np.save writes such arrays with a
# raw-bytes descriptor ('|V2', '|V1', and '<f1' for float8_e5m2, which np.load then refuses). Inputs
# holding raw bytes of the right size are read as the parameter's element type; outputs of those
# types are written as raw bytes ('|V2'...) that plain numpy loads, with their ml_dtypes names in a
# '__dtypes__' entry of the .npz, so that `xlasdk run --inputs out.npz` reads them back exactly.
_DTYPES_KEY = "__dtypes__"


def _is_extension(dt: np.dtype[Any]) -> bool:
    """A dtype numpy does not know (ml_dtypes' bfloat16, float8_*, int4, ...): user-defined type numbers."""
    return dt.num >= 256


def _is_raw(dt: np.dtype[Any]) -> bool:
    """Plain bytes (``|V2``): what numpy reads back from an ml_dtypes array's file."""
    return dt.kind == "V" and not _is_extension(dt) and dt.names is None and dt.subdtype is None


def _describe_array(a: np.ndarray[Any, Any]) -> str:
    from xlasdk.types import dtype_to_etype, hlo_element_name

    dims = ",".join(str(d) for d in a.shape)
    if _is_raw(a.dtype):
        return f"raw {a.dtype.itemsize}-byte values ({a.dtype.str}[{dims}])"
    try:
        et = hlo_element_name(dtype_to_etype(a.dtype))
    except Exception:
        et = str(a.dtype)
    return f"{et}[{dims}]"


def _param_index(name: str, names: Sequence[str]) -> int | None:
    if name in names:
        return list(names).index(name)
    for prefix in ("", "p", "arg", "arr_", "param", "output_"):  # output_N: another run's --output
        rest = name[len(prefix) :] if name.startswith(prefix) else None
        if rest is not None and rest.isdigit() and int(rest) < len(names):
            return int(rest)
    return None


def _load_npy(path: str, what: str) -> NpyArray:
    """The array of an .npy file, its header checked, its data read when used (:mod:`._npfiles`)."""
    return npy_file(path, what)


def _npz_arrays(path: str, what: str) -> tuple[list[tuple[str, NpyArray]], dict[str, str]]:
    """The arrays of an .npz in file order (their data read when used), and its ``__dtypes__``
    manifest (key -> ml_dtypes name)."""
    arrays: list[tuple[str, NpyArray]] = []
    manifest: dict[str, str] = {}
    for key, member in npz_members(path, what):
        if key != _DTYPES_KEY:
            arrays.append((key, member))
            continue
        where = f"{what}: {member.where}"
        if member.nbytes > MAX_MANIFEST_BYTES or member.dtype.kind not in "US" or member.shape != ():
            raise UsageError(f"{where}: not a dtype manifest (a JSON string {{key: ml_dtypes name}}, at most "
                             f"{MAX_MANIFEST_BYTES:,} bytes; it holds {_describe_array(member.stub())})")
        try:
            m = json.loads(str(member.load()[()]))
        except (ValueError, TypeError, IndexError, RecursionError):  # RecursionError: JSON nested too deeply
            m = None
        if not isinstance(m, dict) or not all(isinstance(v, str) for v in m.values()):
            raise UsageError(f"{where}: not a dtype manifest (JSON {{key: ml_dtypes name}})")
        manifest = {str(k): v for k, v in m.items()}
    return arrays, manifest


def _manifest_dtype(name: str | None, itemsize: int) -> np.dtype[Any] | None:
    """The ml_dtypes dtype a manifest names, if it is one and has ``itemsize``-byte items."""
    if name is None:
        return None
    import ml_dtypes

    t = getattr(ml_dtypes, name, None)
    try:
        dt = np.dtype(t) if t is not None else None
    except TypeError:
        return None
    return dt if dt is not None and _is_extension(dt) and dt.itemsize == itemsize else None


def _typed_input(arr: np.ndarray[Any, Any], tag: str | None, want: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """``arr`` with raw bytes read as the element type the manifest names, else as ``want`` when
    the item sizes agree (else still raw: the caller reports it)."""
    if not _is_raw(arr.dtype):
        return arr
    tagged = _manifest_dtype(tag, arr.dtype.itemsize)
    if tagged is not None:
        return arr.view(tagged)
    return arr.view(want) if arr.dtype.itemsize == want.itemsize else arr


def _shell_safe(name: str, index: int) -> str:
    """A parameter's name as ``--input`` takes it, or its index when the name needs shell quoting."""
    return name if re.fullmatch(r"[\w.-]+", name) else str(index)


def _ranges(comp: Any, n: int) -> list[Any]:
    """The parameters' valid ranges learned from ``comp`` (none when it is not given, or its module
    cannot be read as a graph: the default draws, as before ranges were learned)."""
    from xlasdk.errors import GraphImportError
    from xlasdk.inputs import InputRange, input_ranges

    if comp is not None:
        try:
            found = input_ranges(comp)
            if len(found) == n:
                return list(found)
        except GraphImportError:
            pass
    return [InputRange()] * n


def _gather_inputs(args: argparse.Namespace, ps: Any, recorded: Sequence[np.ndarray[Any, Any]] | None = None,
                   comp: Any = None, seed: int | None = None) -> list[np.ndarray[Any, Any]]:
    """One array per parameter: given (``--input`` / ``--inputs``), else ``recorded`` (a snapshot's
    arguments), else random (``--random-inputs``, seeded by ``seed`` or ``--seed``; inside the
    ranges :func:`xlasdk.inputs.input_ranges` learns from ``comp`` when it is given)."""
    names = list(ps.parameter_names())
    shapes = list(ps.parameter_shapes())
    given: dict[int, tuple[NpyArray, str, str | None]] = {}

    listing = ", ".join(f"{i}:{n}" for i, n in enumerate(names))

    def assign(key: str, arr: NpyArray, source: str, where: str, tag: str | None = None) -> None:
        idx = _param_index(key, names)
        if idx is None and key.isdigit():
            have = f"{len(names)} parameter{'s' if len(names) != 1 else ''}"
            raise UsageError(
                f"{where}: parameter index {int(key)} is out of range; the program has {have}"
                + (f": {listing}" if names else "")
            )
        if idx is None:
            raise UsageError(f"{where}: no parameter named {key!r}; parameters are {listing or '(none)'}")
        if idx in given:
            raise UsageError(f"{where}: parameter {idx} ({names[idx]!r}) is given twice")
        given[idx] = (arr, source, tag)

    if args.inputs is not None:
        arrays, manifest = _npz_arrays(args.inputs, "--inputs")
        for key, a in arrays:
            assign(key, a, f"{args.inputs}[{key}]", f"--inputs {args.inputs}[{key}]", manifest.get(key))
    for spec in args.input or []:
        if "=" not in spec:
            raise UsageError(f"--input {spec!r}: expected NAME=FILE.npy")
        key, path = spec.split("=", 1)
        member = None
        head, sep, tail = path.rpartition(":")
        if sep and head.lower().endswith(".npz") and tail and not os.path.exists(path):  # FILE.npz:KEY
            path, member = head, tail
        if member is None:
            assign(key, _load_npy(path, f"--input {key}"), path, f"--input {spec}")
            continue
        arrays, manifest = _npz_arrays(path, f"--input {key}")
        found = dict(arrays)
        if member not in found:
            raise UsageError(f"--input {spec}: {path} has no array {member!r}; it holds {', '.join(found) or 'none'}")
        assign(key, found[member], f"{path}[{member}]", f"--input {spec}", manifest.get(member))
    from xlasdk.inputs import InputRange, random_value

    rng = np.random.default_rng(args.seed if seed is None else seed)
    ranges: list[InputRange] | None = None
    values: list[np.ndarray[Any, Any]] = []
    for i, (n, s) in enumerate(zip(names, shapes, strict=True)):
        if not s.is_array():
            raise UsageError(f"parameter {i} ({n!r}) has shape {s}: only array parameters can be given as inputs")
        if i not in given and recorded is not None:
            values.append(recorded[i])
            continue
        if i not in given:
            if not args.random_inputs:
                raise UsageError(
                    f"missing input for parameter {i} ({n!r}, {s}); give --input {_shell_safe(n, i)}=FILE.npy, "
                    "--inputs FILE.npz or --random-inputs"
                )
            if ranges is None:
                ranges = _ranges(comp, len(shapes))
            values.append(random_value(s, rng, ranges[i]))
            continue
        member, source, tag = given[i]
        want_dt = np.dtype(s.numpy_dtype())
        declared = _typed_input(member.stub(), tag, want_dt)  # checked before the data is read
        if _is_raw(declared.dtype):
            raise UsageError(
                f"input for parameter {i} ({n!r}) must be {s} ({want_dt.itemsize}-byte elements), but {source} "
                f"holds {_describe_array(declared)}"
            )
        if tuple(declared.shape) != tuple(s.dimensions()) or declared.dtype != want_dt:
            raise UsageError(
                f"input for parameter {i} ({n!r}) must be {s}, but {source} holds {_describe_array(declared)}")
        values.append(_typed_input(member.load(), tag, want_dt))
    return values


def _expected_outputs(path: str, n: int, flag: str) -> list[np.ndarray[Any, Any]]:
    """Outputs ``output_0`` ... ``output_{n-1}`` of an .npz (as ``xlasdk run --output`` writes them,
    bf16 and other raw-byte types read through its ``__dtypes__`` entry), or, in a file without
    them, by position as ``np.savez(path, *outputs)`` names them (``arr_0``...) or as ``--inputs``
    takes them (``0``...); ``flag`` names the option."""
    arrays, manifest = _npz_arrays(path, flag)
    by_key = dict(arrays)
    prefix = "output_"
    if "output_0" not in by_key:
        prefix = next((p for p in ("arr_", "") if f"{p}0" in by_key), prefix)
    out = []
    for i in range(n):
        key = f"{prefix}{i}"
        if key not in by_key:
            raise UsageError(f"{flag} {path}: no {key} (the file holds {', '.join(sorted(by_key)) or 'nothing'}; "
                             "outputs are output_0, output_1... as `xlasdk run --output` writes them, or arr_0, "
                             "arr_1... as np.savez(path, *outputs) does)")
        a = by_key[key].load()
        out.append(_typed_input(a, manifest.get(key), a.dtype))
    return out


def _npz_entries(host: Sequence[np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
    """What ``--output`` writes: ``output_N`` per output; ml_dtypes arrays as raw bytes plus a
    ``__dtypes__`` manifest (JSON ``{"output_N": "bfloat16", ...}``), only when there are any."""
    entries: dict[str, np.ndarray[Any, Any]] = {}
    manifest: dict[str, str] = {}
    for i, a in enumerate(host):
        key = f"output_{i}"
        if _is_extension(a.dtype):
            entries[key] = np.ascontiguousarray(a).view(f"V{a.dtype.itemsize}")
            manifest[key] = a.dtype.name
        else:
            entries[key] = a
    if manifest:
        entries[_DTYPES_KEY] = np.array(json.dumps(manifest, sort_keys=True))
    return entries


def _summary(a: np.ndarray[Any, Any]) -> str:
    if a.size == 0:
        return "(empty)"
    flat = a.reshape(-1)
    try:
        f = flat.astype(np.float64) if a.dtype.kind not in "bc" else None
    except (TypeError, ValueError):
        f = None
    if a.dtype.kind in "iu":  # integers in integer notation (min -2147483648, not -2.14748e+09)
        stats = f"min {int(flat.min())}  max {int(flat.max())}  mean {float(flat.mean(dtype=np.float64)):.6g}"
    elif f is not None:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN array: "All-NaN slice", "Mean of empty"
            stats = f"min {np.nanmin(f):.6g}  max {np.nanmax(f):.6g}  mean {np.nanmean(f):.6g}"
        nan = int(np.isnan(f).sum())
        if nan:
            stats += f"  nan {nan}"
    elif a.dtype.kind == "b":
        stats = f"true {int(flat.sum())} of {flat.size}"
    else:
        stats = f"abs max {float(np.abs(flat).max()):.6g}"
    head = np.array2string(flat[:6], max_line_width=sys.maxsize, precision=6, separator=", ", threshold=6)
    if flat.size > 6:
        head = head[:-1] + ", ...]"
    return f"{stats}  {head}"
