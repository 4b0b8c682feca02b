"""HloSnapshot files: XLA's own (made here with jax, a test-only peer, through XLA's
``xla_dump_hlo_snapshots`` / ``xla_dump_hlo_unoptimized_snapshots``), read whole, replayed, and
written back byte for byte as XLA writes them; ``xlasdk run`` on them (``--expect``, ``--record``)."""

from __future__ import annotations

import contextlib
import glob
import io
import os
from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk.cli import main
from xlasdk.formats.protobuf import _proto_fields
from xlasdk.formats.snapshot import literal_from_proto, literal_to_proto, read_snapshot, snapshot_kind

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

# Every XLA array element type jax passes as an argument, with negative values where the type has them.
TYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16",
         "float32", "float64", "complex64", "complex128", "int4", "uint4", "int2", "uint2", "float8_e4m3fn",
         "float8_e5m2", "float8_e4m3b11fnuz", "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e4m3", "float8_e3m4",
         "float8_e8m0fnu", "float4_e2m1fn"]


def _value(name: str) -> np.ndarray[Any, Any]:
    dt = np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)
    if dt == np.bool_:
        return np.array([[True, False, True], [False, False, True]])
    if dt.kind == "c":
        return np.array([[1 + 2j, -3.5 - 1j, 0], [1e30, -0.0, 2.25j]], dt)
    if dt.kind == "u" or name.startswith("uint") or name == "float8_e8m0fnu":
        return np.array([[1, 2, 3], [0, 1, 2]]).astype(dt) if name != "float8_e8m0fnu" else \
            np.array([[1, 2, 4], [0.5, 8, 0.25]]).astype(dt)
    if name in ("int2",):
        return np.array([[1, -2, -1], [0, 1, -2]]).astype(dt)
    base = np.array([[1, -2, 3], [0, -1, 0.5]])
    if dt.kind in "iu" or name.startswith("int"):
        base = np.array([[1, -2, 3], [0, -1, -8]])
    if dt.kind == "f" and dt.itemsize >= 4:
        base = np.array([[1.5, -2e-3, 3e30], [np.inf, -0.0, np.nan]])
    return base.astype(dt)


def _xla_snapshots(tmp: str, fn: Callable[..., Any], args: list[Any], unoptimized: bool = False) -> str:
    """Run ``fn`` under jax with XLA's snapshot dumping on; the snapshot file XLA wrote."""
    flag = "xla_dump_hlo_unoptimized_snapshots" if unoptimized else "xla_dump_hlo_snapshots"
    compiled = jax.jit(fn).lower(*args).compile(compiler_options={"xla_dump_to": tmp, flag: True})
    jax.block_until_ready(compiled(*args))
    pattern = "*.hlo_unoptimized_snapshot.pb" if unoptimized else "*.snapshot.*.pb"
    files = sorted(glob.glob(os.path.join(tmp, pattern)))
    assert len(files) == 1, os.listdir(tmp)
    return files[0]


@pytest.fixture(scope="module")
def every_type(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[np.ndarray[Any, Any]]]:
    """An XLA snapshot of a program that reverses one argument of every element type."""
    args = [_value(n) for n in TYPES]
    with jax.enable_x64(True):
        path = _xla_snapshots(str(tmp_path_factory.mktemp("every_type")),
                              lambda *a: tuple(x[::-1, ::-1] for x in a), args)
    return path, args


def _mlp(w: Any, x: Any, labels: Any) -> Any:
    h = jnp.tanh(x @ w[0].astype(jnp.bfloat16).astype(jnp.float32))
    logits = h @ w[1]
    return jax.nn.logsumexp(logits, axis=-1).mean(), jnp.argmax(logits, axis=-1) == labels


@pytest.fixture(scope="module")
def mlp_args() -> list[Any]:
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((8, 16), np.float32), rng.standard_normal((16, 4), np.float32))
    return [w, rng.standard_normal((5, 8), np.float32), rng.integers(0, 4, 5).astype(np.int32)]


def _fields(path: str, number: int) -> list[bytes]:
    with open(path, "rb") as f:
        return [v for n, _, v in _proto_fields(f.read()) if n == number]


@contextlib.contextmanager
def _refused(exc: type[Exception], *words: str) -> Iterator[None]:
    """The block raises ``exc`` whose message names every word (file errors carry no source line)."""
    with pytest.raises(exc) as info:
        yield
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def _same(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    assert got.tobytes() == want.tobytes(), (got, want)


# -- reading XLA's files ---------------------------------------------------------------------------
def test_reads_the_arguments_and_result_of_every_element_type(every_type: Any) -> None:
    path, args = every_type
    snap = xs.load_snapshot(path)
    assert snap.kind == "snapshot" and snap.path == path and snapshot_kind(open(path, "rb").read()) == "snapshot"
    assert len(snap.arguments) == len(TYPES)
    for name, got, want in zip(TYPES, snap.arguments, args, strict=True):
        _same(got, want)  # the values jax passed, bit for bit
        assert got.flags.writeable, name
    outs = snap.outputs()
    assert outs is not None and isinstance(snap.result, tuple)
    for got, a in zip(outs, args, strict=True):
        _same(got, np.ascontiguousarray(a[::-1, ::-1]))


def test_literals_are_written_byte_for_byte_as_xla_writes_them(every_type: Any) -> None:
    path, _ = every_type
    snap = xs.load_snapshot(path)
    for name, a, raw in zip(TYPES, snap.arguments, _fields(path, 2), strict=True):
        assert literal_to_proto(a) == raw, name
    assert literal_to_proto(snap.result) == _fields(path, 3)[0]


def test_replay_of_an_xla_snapshot_is_bit_exact(every_type: Any, tmp_path: Any, mlp_args: list[Any]) -> None:
    path, _ = every_type
    snap = xs.load_snapshot(path)
    outs = xs.compile(snap.computation, "cpu:0")(*snap.arguments)
    for got, want in zip(outs, snap.outputs() or [], strict=True):
        _same(got.to_numpy(), want)
    mlp = _xla_snapshots(str(tmp_path), _mlp, mlp_args)  # an optimized module with fusions
    snap = xs.load_snapshot(mlp)
    want = jax.jit(_mlp)(*mlp_args)
    assert len(snap.arguments) == 4
    outs = xs.compile(snap.computation, "cpu:0")(*snap.arguments)
    for got, rec, w in zip(outs, snap.outputs() or [], want, strict=True):
        _same(got.to_numpy(), rec)
        _same(rec, np.asarray(w))


def test_unoptimized_snapshot(tmp_path: Any, mlp_args: list[Any]) -> None:
    path = _xla_snapshots(str(tmp_path), _mlp, mlp_args, unoptimized=True)
    snap = xs.load_snapshot(path)
    assert snap.kind == "unoptimized_snapshot" and snap.result is None and snap.outputs() is None
    assert len(snap.partitions) == 1
    for got, want in zip(snap.arguments, [*mlp_args[0], *mlp_args[1:]], strict=True):
        _same(got, want)
    assert "fusion" not in snap.computation.as_hlo_text()
    want = jax.jit(_mlp)(*mlp_args)
    outs = xs.compile(snap.computation, "cpu:0")(*snap.arguments)
    np.testing.assert_allclose(outs[0].to_numpy(), np.asarray(want[0]), rtol=1e-6)
    _same(outs[1].to_numpy(), np.asarray(want[1]))


def test_recording_through_compile_options(tmp_path: Any) -> None:
    """XLA's own dump flag, through xs.CompileOptions: what the docs say records a whole program."""
    b = xs.XlaBuilder("scaled")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (4,)), "x")
    ops.Mul(x, ops.Constant(b, np.float32(3)))
    opts = xs.CompileOptions(xla_dump_to=str(tmp_path), env_option_overrides={"xla_dump_hlo_snapshots": True})
    x_val = np.array([1, -2, 0.5, 8], np.float32)
    xs.compile(b.build(), "cpu:0", options=opts)(x_val).to_numpy()
    (path,) = glob.glob(str(tmp_path / "*.snapshot.*.pb"))
    snap = xs.load_snapshot(path)
    _same(snap.arguments[0], x_val)
    _same(snap.outputs()[0], x_val * 3)  # type: ignore[index]


# -- layouts and hand-made literals ----------------------------------------------------------------
def _literal_bytes(etype: int, dims: list[int], minor_to_major: list[int] | None, field: int, data: bytes) -> bytes:
    def ld(n: int, payload: bytes) -> bytes:
        return bytes([n << 3 | 2, len(payload)]) + payload

    shape = bytes([0x10, etype]) + ld(3, bytes(dims))
    if minor_to_major is not None:
        shape += ld(5, ld(1, bytes(minor_to_major)))
    return ld(1, shape) + ld(field, data)


def test_a_column_major_literal_is_read_in_logical_order() -> None:
    # s8[2,3] with minor_to_major {0,1}: memory holds column after column
    raw = _literal_bytes(2, [2, 3], [0, 1], 15, bytes([1, 4, 2, 5, 3, 6]))
    np.testing.assert_array_equal(literal_from_proto(raw), np.array([[1, 2, 3], [4, 5, 6]], np.int8))
    raw = _literal_bytes(2, [2, 3], [1, 0], 15, bytes([1, 2, 3, 4, 5, 6]))
    np.testing.assert_array_equal(literal_from_proto(raw), np.array([[1, 2, 3], [4, 5, 6]], np.int8))


def test_literals_that_do_not_fit_their_shape_are_refused() -> None:
    with _refused(xs.FormatError, "needs 6 elements", "holds 5"):
        literal_from_proto(_literal_bytes(2, [2, 3], None, 15, bytes(5)))
    with _refused(xs.FormatError, "not a permutation"):
        literal_from_proto(_literal_bytes(2, [2, 3], [0, 0], 15, bytes(6)))
    with _refused(xs.FormatError, "not a whole number"):
        literal_from_proto(_literal_bytes(16, [3], None, 13, bytes(5)))  # bf16[3] in 5 bytes
    with _refused(xs.FormatError, "truncated"):
        literal_from_proto(_literal_bytes(4, [2], None, 4, b"\x01\x80"))  # s32 varint cut short
    with _refused(xs.FormatError, "element type TOKEN"):
        literal_from_proto(b"\x0a\x02\x10\x11")
    nested: Any = np.int8(1).reshape(())
    for _ in range(100):
        nested = (nested,)
    with _refused(xs.FormatError, "nested more than 64"):
        literal_from_proto(literal_to_proto(nested))


# -- writing ---------------------------------------------------------------------------------------
def test_record_and_replay_round_trip_for_every_element_type(tmp_path: Any) -> None:
    args = [_value(n) for n in TYPES]
    b = xs.XlaBuilder("every_type")
    params = [ops.Parameter(b, i, xs.Shape.array_shape(a.dtype, a.shape), f"p{i}") for i, a in enumerate(args)]
    ops.Tuple(b, [ops.Rev(p, [0]) for p in params])
    exe = xs.compile(b.build(), "cpu:0")
    outs, path = exe.record(args, tmp_path / "snaps")
    assert path == str(tmp_path / "snaps" / "every_type.snapshot.0.pb")
    snap = xs.load_snapshot(path)  # the module goes through XLA's proto parser and verifier
    assert snap.kind == "snapshot" and snap.execution_platform == "cpu"
    for got, want in zip(snap.arguments, args, strict=True):
        _same(got, want)
    for got, o, a in zip(snap.outputs() or [], outs, args, strict=True):
        _same(got, o.to_numpy())
        _same(got, np.ascontiguousarray(a[::-1]))
    _, second = exe.record(args, tmp_path / "snaps")
    assert second.endswith("every_type.snapshot.1.pb")
    replay = xs.compile(snap.computation, "cpu:0")(*snap.arguments)
    for got, want in zip(replay, snap.outputs() or [], strict=True):
        _same(got.to_numpy(), want)


def test_write_snapshot_checks_arguments(tmp_path: Any) -> None:
    b = xs.XlaBuilder("f")
    ops.Neg(ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)), "x"))
    comp = b.build()
    target = tmp_path / "s.pb"
    with _refused(xs.ShapeError, "argument 0 is float64[2]", "parameter 0"):
        xs.write_snapshot(target, comp, [np.zeros(2)])
    with _refused(xs.ShapeError, "records 0 argument(s)", "1 parameter(s)"):
        xs.write_snapshot(target, comp, [])
    assert not target.exists()


def test_files_that_are_not_snapshots_are_refused(tmp_path: Any, every_type: Any) -> None:
    path, _ = every_type
    data = open(path, "rb").read()
    module = tmp_path / "module.pb"
    b = xs.XlaBuilder("f")
    ops.Neg(ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)), "x"))
    module.write_bytes(b.build().as_serialized_hlo_module_proto())
    with _refused(xs.FormatError, "module.pb", "not an HloSnapshot", "load_computation"):
        xs.load_snapshot(module)
    text = tmp_path / "snap.pbtxt"
    text.write_text("hlo {\n  hlo_module {\n")
    with _refused(xs.FormatError, "snap.pbtxt:2:14: not a valid text-format HloSnapshot"):  # line:column
        xs.load_snapshot(text)
    cut = tmp_path / "cut.pb"
    cut.write_bytes(data[: len(data) - 7])
    with _refused(xs.FormatError, "cut.pb"):
        xs.load_snapshot(cut)
    with _refused(xs.FormatError, "no such file"):
        xs.load_snapshot(tmp_path / "missing.pb")
    # a snapshot whose arguments do not match its module: one argument dropped
    fields = _proto_fields(data)
    dropped = b"".join(_reencode(n, w, v) for k, (n, w, v) in enumerate(fields) if not (n == 2 and k == 1))
    with _refused(xs.FormatError, "records 27 argument(s)", "28 parameter(s)"):
        read_snapshot(dropped, "dropped.pb")


def _reencode(num: int, wt: int, v: Any) -> bytes:
    def varint(x: int) -> bytes:
        out = bytearray()
        while True:
            out.append(x & 0x7F | (0x80 if x > 0x7F else 0))
            x >>= 7
            if not out[-1] & 0x80:
                return bytes(out)

    assert wt == 2
    return varint(num << 3 | 2) + varint(len(v)) + v


# -- the CLI ---------------------------------------------------------------------------------------
def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_run_replays_a_snapshot_and_checks_the_recorded_result(tmp_path: Any, mlp_args: list[Any]) -> None:
    path = _xla_snapshots(str(tmp_path / "dump"), _mlp, mlp_args)
    code, out, err = _cli("run", path, "--expect", "recorded")
    assert code == 0, err
    assert "4 input(s) (the recorded arguments of the snapshot)" in out
    assert "outputs vs the recorded result: MATCH (bit-exact)" in out
    # the same file with an edited recorded result: exit 1, the report names the output
    fields = _proto_fields(open(path, "rb").read())
    snap = xs.load_snapshot(path)
    res = snap.result
    assert isinstance(res, tuple)
    edited = (np.float32(res[0] + 1e-2).reshape(res[0].shape), res[1])
    data = b"".join(_reencode(n, w, literal_to_proto(edited) if n == 3 else v) for n, w, v in fields)
    bad = tmp_path / "edited.snapshot.0.pb"
    bad.write_bytes(data)
    code, out, _ = _cli("run", str(bad), "--expect", "recorded")
    assert code == 1
    assert "DIVERGENCE" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("0 "))
    assert row.split()[-2:] == ["1", "[]"]  # one mismatch, at the scalar's (only) index
    # given inputs win over recorded ones, and the report says how many were recorded
    np.save(tmp_path / "x.npy", np.zeros((5, 8), np.float32))
    code, out, err = _cli("run", path, "--input", f"2={tmp_path / 'x.npy'}")
    assert code == 0, err
    assert "(3 of them the snapshot's recorded arguments)" in out


def test_run_record_then_expect(tmp_path: Any) -> None:
    src = tmp_path / "m.hlo"
    src.write_text("HloModule m\n\nENTRY e {\n  p = bf16[3] parameter(0)\n  ROOT r = bf16[3] multiply(p, p)\n}\n")
    x = np.array([1.5, -2, 3], ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", x)
    code, out, err = _cli("run", str(src), "--input", f"0={tmp_path / 'x.npy'}", "--record", str(tmp_path / "rec"),
                          "--output", str(tmp_path / "out.npz"))
    assert code == 0, err
    (path,) = glob.glob(str(tmp_path / "rec" / "m.snapshot.*.pb"))
    assert f"recorded {path}" in out
    snap = xs.load_snapshot(path)
    _same(snap.arguments[0], x)
    _same(snap.outputs()[0], (x.astype(np.float32) ** 2).astype(ml_dtypes.bfloat16))  # type: ignore[index]
    code, out, err = _cli("run", path, "--expect", "recorded")
    assert code == 0 and "MATCH (bit-exact)" in out, err
    code, out, err = _cli("run", path, "--expect", str(tmp_path / "out.npz"))
    assert code == 0 and "outputs vs the outputs in" in out, err


def test_run_expect_usage_errors(tmp_path: Any) -> None:
    src = tmp_path / "m.hlo"
    src.write_text("HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] negate(p)\n}\n")
    code, _, err = _cli("run", str(src), "--random-inputs", "--expect", "recorded")
    assert code == 2 and "is not a snapshot" in err
    code, _, err = _cli("run", str(src), "--random-inputs", "--expect", "out.json")
    assert code == 2 and "expected 'recorded' or an .npz" in err
    (tmp_path / "file").write_text("")
    code, _, err = _cli("run", str(src), "--random-inputs", "--record", str(tmp_path / "file"))
    assert code == 2 and "not a directory" in err


def test_inspect_says_what_a_snapshot_records(every_type: Any) -> None:
    path, _ = every_type
    code, out, err = _cli("inspect", path, "--no-compile")
    assert code == 0, err
    assert "(HloSnapshot: module, arguments, result)" in out
    assert f"recorded:      {len(TYPES)} argument(s), the result" in out
    code, out, err = _cli("inspect", path, "--no-compile", "--json")
    import json

    doc = json.loads(out)
    assert doc["snapshot"] == {"kind": "snapshot", "arguments": len(TYPES), "partitions": 1, "result": True,
                               "execution_platform": None}


def test_compare_and_reduce_take_a_snapshot_s_arguments(tmp_path: Any, mlp_args: list[Any]) -> None:
    path = _xla_snapshots(str(tmp_path / "dump"), _mlp, mlp_args, unoptimized=True)
    code, out, err = _cli("compare", path)  # no inputs given: the recorded ones
    assert code == 0 and "MATCH" in out, (out, err)
    out_hlo = tmp_path / "min.hlo"
    code, out, err = _cli("reduce", path, "--script", "grep -q tanh", "--output", str(out_hlo))
    assert code == 0, err
    assert "tanh(" in out_hlo.read_text()
    snap = xs.load_snapshot(tmp_path / "min.snapshot.pb")  # the reduced module with arguments
    assert len(snap.arguments) == len(snap.computation.program_shape().parameter_shapes()) > 0

