"""Text-format HloSnapshots: what XLA writes with ``--xla_dump_hlo_as_text`` beside
``--xla_dump_hlo_unoptimized_snapshots`` (made here with jax, a test-only peer), and the text form of
XLA's binary ``HloSnapshot`` files (printed by protobuf's own ``text_format``), load to the same module,
arguments and result as the binary files of the same run; broken text is refused with its line and
column; a missing protobuf package or schema gives the install hint."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.test_snapshot import TYPES, _cli, _refused, _same, _value
from xlasdk._jaxlib import protodesc
from xlasdk.formats.snapshot import read_snapshot
from xlasdk.formats.sniff import text_snapshot_kind

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
text_format = pytest.importorskip("google.protobuf.text_format")

Arrays = list[np.ndarray[Any, Any]]


def _dump(tmp: str, fn: Callable[..., Any], args: list[Any], *, unoptimized: bool, as_text: bool) -> tuple[str, Any]:
    """Run ``fn`` under jax with XLA's snapshot dumping on: the one snapshot file XLA wrote, and jax's result."""
    flag = "xla_dump_hlo_unoptimized_snapshots" if unoptimized else "xla_dump_hlo_snapshots"
    options: dict[str, Any] = {"xla_dump_to": tmp, flag: True}
    if as_text:
        options["xla_dump_hlo_as_text"] = True
    compiled = jax.jit(fn).lower(*args).compile(compiler_options=options)
    out = jax.block_until_ready(compiled(*args))
    files = sorted(f for f in os.listdir(tmp) if "snapshot" in f)
    assert len(files) == 1, files
    return os.path.join(tmp, files[0]), out


def _as_text(binary_path: str, out: str) -> str:
    """XLA's binary snapshot printed by protobuf's text_format (what ``protoc --decode`` writes)."""
    data = open(binary_path, "rb").read()
    name = "xla.HloUnoptimizedSnapshot" if "unoptimized" in binary_path else "xla.HloSnapshot"
    msg = protodesc.message_class(name).FromString(data)
    with open(out, "w") as f:
        f.write(text_format.MessageToString(msg))
    return out


def _same_snapshots(text: xs.formats.Snapshot, binary: xs.formats.Snapshot) -> None:
    assert text.kind == binary.kind
    assert text.computation.as_hlo_text() == binary.computation.as_hlo_text()
    assert text.execution_platform == binary.execution_platform
    assert len(text.partitions) == len(binary.partitions)
    for got, want in zip(text.arguments, binary.arguments, strict=True):
        _same(got, want)
    assert (text.outputs() is None) == (binary.outputs() is None)
    for got, want in zip(text.outputs() or [], binary.outputs() or [], strict=True):
        _same(got, want)


# -- an MLP training step in bf16 ------------------------------------------------------------------
def _step(params: Any, x: Any, y: Any) -> Any:
    def loss(p: Any) -> Any:
        h = jnp.tanh(x.astype(jnp.bfloat16) @ p[0])
        return jnp.mean(((h @ p[1]).astype(jnp.float32) - y) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    return value, tuple(w - (0.1 * g).astype(w.dtype) for w, g in zip(params, grads, strict=True))


@pytest.fixture(scope="module")
def step_args() -> list[Any]:
    rng = np.random.default_rng(3)
    params = (rng.standard_normal((8, 16)).astype(ml_dtypes.bfloat16),
              rng.standard_normal((16, 4)).astype(ml_dtypes.bfloat16))
    return [params, rng.standard_normal((5, 8), np.float32), rng.standard_normal((5, 4), np.float32)]


def _flat(args: list[Any]) -> Arrays:
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]


@pytest.fixture(scope="module")
def step_dumps(tmp_path_factory: pytest.TempPathFactory, step_args: list[Any]) -> dict[str, Any]:
    """XLA's snapshots of one MLP step: unoptimized as text and as binary, optimized (binary only:
    XLA writes it so even with xla_dump_hlo_as_text), and jax's result."""
    out: dict[str, Any] = {}
    for key, unoptimized, as_text in (("unopt_text", True, True), ("unopt_bin", True, False),
                                      ("opt_bin", False, False), ("opt_text_flag", False, True)):
        out[key], out["result"] = _dump(str(tmp_path_factory.mktemp(key)), _step, step_args,
                                        unoptimized=unoptimized, as_text=as_text)
    return out


def test_xla_writes_unoptimized_snapshots_as_text_and_optimized_ones_as_binary(step_dumps: dict[str, Any]) -> None:
    assert re.fullmatch(r"module_\d{4,}\.jit__step\.execution_\d{4}\.hlo_unoptimized_snapshot\.txt",
                        os.path.basename(step_dumps["unopt_text"])), step_dumps["unopt_text"]
    assert step_dumps["unopt_bin"].endswith(".hlo_unoptimized_snapshot.pb")
    assert re.fullmatch(r"module_\d{4,}\.jit__step\.snapshot\.-?\d+\.pb", os.path.basename(step_dumps["opt_text_flag"]))
    head = open(step_dumps["unopt_text"], "rb").read()
    assert head.startswith(b"hlo_module {") and text_snapshot_kind(head) == "unoptimized_snapshot"
    assert text_snapshot_kind(open(step_dumps["unopt_bin"], "rb").read()) is None


def test_xla_s_text_unoptimized_snapshot_loads_as_the_binary_one(step_dumps: dict[str, Any],
                                                                 step_args: list[Any]) -> None:
    text = xs.load_snapshot(step_dumps["unopt_text"])
    binary = xs.load_snapshot(step_dumps["unopt_bin"])
    assert text.path == step_dumps["unopt_text"] and text.kind == "unoptimized_snapshot" and text.result is None
    _same_snapshots(text, binary)
    for got, want in zip(text.arguments, _flat(step_args), strict=True):
        _same(got, want)  # the values jax passed, bit for bit (bf16 parameters)
    assert text.arguments[0].dtype == ml_dtypes.bfloat16
    outs = xs.compile(text.computation, "cpu:0")(*text.arguments)
    for got, want in zip(outs, _flat([step_dumps["result"]]), strict=True):
        _same(got.to_numpy(), want)  # the module replays to jax's result, bit for bit
    # load_computation reads the module out of it, as it does out of the binary file
    assert xs.load_computation(step_dumps["unopt_text"]).as_hlo_text() == binary.computation.as_hlo_text()


def test_text_of_an_optimized_snapshot_loads_as_the_binary_one(step_dumps: dict[str, Any], tmp_path: Any) -> None:
    path = _as_text(step_dumps["opt_bin"], str(tmp_path / "step.snapshot.0.txt"))
    text = xs.load_snapshot(path)
    assert text.kind == "snapshot" and text.result is not None
    _same_snapshots(text, xs.load_snapshot(step_dumps["opt_bin"]))
    for got, want in zip(text.outputs() or [], _flat([step_dumps["result"]]), strict=True):
        _same(got, want)


# -- every element type ------------------------------------------------------------------------------
def _reverse_all(*a: Any) -> Any:
    return tuple(x[::-1, ::-1] for x in a)


def test_every_element_type_reads_the_same_from_text(tmp_path: Any) -> None:
    args = [_value(n) for n in TYPES]
    with jax.enable_x64(True):
        unopt_text, _ = _dump(str(tmp_path / "ut"), _reverse_all, args, unoptimized=True, as_text=True)
        unopt_bin, _ = _dump(str(tmp_path / "ub"), _reverse_all, args, unoptimized=True, as_text=False)
        opt_bin, _ = _dump(str(tmp_path / "ob"), _reverse_all, args, unoptimized=False, as_text=False)
    text = xs.load_snapshot(unopt_text)
    _same_snapshots(text, xs.load_snapshot(unopt_bin))
    for name, got, want in zip(TYPES, text.arguments, args, strict=True):
        assert got.dtype == want.dtype, name
        _same(got, want)  # XLA's own text of every type (fp8 and int4 bytes, f64 inf/nan/-0.0), bit for bit
    opt_text = xs.load_snapshot(_as_text(opt_bin, str(tmp_path / "every.snapshot.0.txt")))
    binary = xs.load_snapshot(opt_bin)
    _same_snapshots(opt_text, binary)
    for got, a in zip(opt_text.outputs() or [], args, strict=True):
        _same(got, np.ascontiguousarray(a[::-1, ::-1]))


# -- XLA_FLAGS in a fresh process, and the CLI ---------------------------------------------------------
_PROGRAM = """
import numpy as np, jax, jax.numpy as jnp
x = np.linspace(-2, 3, 12, dtype=np.float32).reshape(3, 4)
w = np.arange(8, dtype=np.float32).reshape(4, 2).astype(jnp.bfloat16)
jax.block_until_ready(jax.jit(lambda x, w: (jnp.sin(x) @ w.astype(jnp.float32), x > 0))(x, w))
"""


def test_xla_flags_dump_loads_and_runs_through_the_cli(tmp_path: Any) -> None:
    dump = tmp_path / "dump"
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_unoptimized_snapshots --xla_dump_hlo_as_text"}
    subprocess.run([sys.executable, "-c", _PROGRAM], env=env, check=True, timeout=300, capture_output=True)
    (path,) = glob.glob(str(dump / "*.hlo_unoptimized_snapshot.txt"))
    snap = xs.load_snapshot(path)
    x = np.linspace(-2, 3, 12, dtype=np.float32).reshape(3, 4)
    w = np.arange(8, dtype=np.float32).reshape(4, 2).astype(ml_dtypes.bfloat16)
    _same(snap.arguments[0], x)
    _same(snap.arguments[1], w)
    out = tmp_path / "out.npz"
    code, stdout, err = _cli("run", path, "--output", str(out))
    assert code == 0, err
    assert "(the recorded arguments of the unoptimized snapshot)" in stdout
    want = jax.jit(lambda x, w: (jnp.sin(x) @ w.astype(jnp.float32), x > 0))(x, w)
    with np.load(out) as got:
        for key, value in zip(sorted(got.files), want, strict=True):
            _same(got[key], np.asarray(value))
    code, stdout, err = _cli("inspect", path, "--no-compile")
    assert code == 0 and "recorded:" in stdout and "2 argument(s)" in stdout, (stdout, err)
    code, stdout, err = _cli("compare", path)
    assert code == 0 and "MATCH" in stdout, (stdout, err)


def test_run_expect_recorded_on_a_text_snapshot(step_dumps: dict[str, Any], tmp_path: Any) -> None:
    path = _as_text(step_dumps["opt_bin"], str(tmp_path / "step.snapshot.0.txt"))
    code, out, err = _cli("run", path, "--expect", "recorded")
    assert code == 0, err
    assert "outputs vs the recorded result: MATCH (bit-exact)" in out
    # one recorded value edited in the text: the loss, the first f32 of the result
    text = open(path).read()
    at = text.index("\nresult {")
    m = re.compile(r"f32s: (\S+)").search(text, at)
    assert m is not None
    edited = text[: m.start(1)] + repr(float(m.group(1)) + 0.5) + text[m.end(1):]
    bad = tmp_path / "edited.snapshot.0.txt"
    bad.write_text(edited)
    code, out, _ = _cli("run", str(bad), "--expect", "recorded")
    assert code == 1 and "DIVERGENCE" in out


# -- text that is not a snapshot, or broken --------------------------------------------------------
@pytest.fixture(scope="module")
def small_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    """XLA's text of a small unoptimized snapshot."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    path, _ = _dump(str(tmp_path_factory.mktemp("small")), lambda v: v * 2, [x], unoptimized=True, as_text=True)
    return open(path).read()


def _error(tmp_path: Any, text: str | bytes, name: str = "bad.txt", *, same: bool = True) -> str:
    """The FormatError of load_snapshot on ``text`` (and, with ``same``, load_computation's, equal)."""
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    with pytest.raises(xs.FormatError) as info:
        xs.load_snapshot(path)
    message = str(info.value)
    if same:
        with pytest.raises(xs.FormatError) as info2:
            xs.load_computation(path)
        assert str(info2.value) == message
    return message


def test_truncated_text_names_its_line_and_column(small_text: str, tmp_path: Any) -> None:
    lines = small_text.split("\n")[:40]  # the file cut after line 40, inside the first computation
    message = _error(tmp_path, "\n".join(lines))
    assert re.match(rf"{re.escape(str(tmp_path / 'bad.txt'))}:40:\d+: ", message), message
    assert 'Expected "}"' in message
    assert "not a valid text-format HloUnoptimizedSnapshot" in message


def test_a_garbled_field_names_its_line_and_column(small_text: str, tmp_path: Any) -> None:
    lines = small_text.split("\n")
    k = next(i for i, line in enumerate(lines) if line.strip().startswith("opcode:"))
    col = lines[k].index("opcode") + 1
    lines[k] = lines[k].replace("opcode", "opcod3", 1)
    message = _error(tmp_path, "\n".join(lines))
    assert message.startswith(f"{tmp_path / 'bad.txt'}:{k + 1}:{col}:"), message
    assert "opcod3" in message
    # a value of the wrong type: the column of the value
    lines = small_text.split("\n")
    k = next(i for i, line in enumerate(lines) if line.strip().startswith("f32s:"))
    lines[k] = lines[k].replace("f32s: ", "f32s: \"x\"", 1)
    message = _error(tmp_path, "\n".join(lines))
    assert message.startswith(f"{tmp_path / 'bad.txt'}:{k + 1}:"), message
    # not UTF-8 on line 3
    raw = small_text.encode().split(b"\n")
    raw[2] = b"  \xff" + raw[2]
    message = _error(tmp_path, b"\n".join(raw))
    assert message.startswith(f"{tmp_path / 'bad.txt'}:3:3: not UTF-8"), message


def test_hostile_text_is_refused_without_harm(tmp_path: Any) -> None:
    deep = "hlo { hlo_module { computations { instructions { shape {" + " tuple_shapes {" * 20000
    assert "nested" in _error(tmp_path, deep) or "too deep" in _error(tmp_path, deep)
    message = _error(tmp_path, "hlo_module { id: 99999999999999999999999999 }")
    assert ":1:" in message
    message = _error(tmp_path, "hlo_module { name: \"m\" }\n")  # parses, but no arguments
    assert "not an HloSnapshot" in message
    message = _error(tmp_path, "hlo_module {\n  name: \"m\" }\npartitions {\n  arguments { shape { element_type: F32 "
                               "dimensions: 2 } f32s: 1 }\n}\n")
    assert "needs 2 elements" in message or "parameter" in message or "entry" in message.lower(), message


def test_long_strings_are_cut_into_pieces_that_read_the_same(step_dumps: dict[str, Any],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Long quoted strings (bf16 data) are handed to protobuf's tokenizer in pieces (its memory grows
    ~100 bytes per escaped character of one token): the pieces unescape to the same bytes (protobuf's
    CUnescape the oracle), and XLA's text with every string cut reads as the binary file."""
    import random

    from google.protobuf import text_encoding

    from xlasdk.formats import text_proto

    rng = random.Random(0)
    atoms = ["\\\\", "\\\"", "\\'", "\\n", "\\000", "\\1", "\\12", "\\377", "\\x4", "\\x4f", "a", "7",
             "\\u00e9", "\\U0001F600", "\u00e9", " "]
    for size in (11, 12, 16):
        monkeypatch.setattr(text_proto, "_PIECE", size)
        for _ in range(1000):
            inner = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 40)))
            pieces = text_proto._pieces(inner)
            assert "".join(pieces) == inner and all(len(p) <= size for p in pieces)
            want = text_encoding.CUnescape(inner)
            assert b"".join(text_encoding.CUnescape(p) for p in pieces) == want, (inner, pieces)
    monkeypatch.setattr(text_proto, "_PIECE", 16)  # every string of XLA's text longer than 16 is cut
    data = open(step_dumps["unopt_text"], "rb").read()
    assert any(len(line) > 40 and b'"' in line for line in data.split(b"\n"))
    _same_snapshots(read_snapshot(data, "cut"), xs.load_snapshot(step_dumps["unopt_bin"]))
    # a long line with quotes of another shape is refused, at its line
    monkeypatch.setattr(text_proto, "_MAX_QUOTED_LINE", 100)
    bad = data.replace(b"\n", b' name: "' + b"x" * 100 + b'" other: "y"\n', 1)
    with _refused(xs.FormatError, "bad:1: a line of", "with quotes"):
        read_snapshot(bad, "bad")


def test_text_that_is_no_snapshot_is_still_refused(tmp_path: Any) -> None:
    message = _error(tmp_path, "name: \"x\"\n", "x.txt", same=False)
    assert message.startswith(str(tmp_path / "x.txt")) and "not a text-format HloSnapshot" in message, message
    with _refused(xs.FormatError, "x.txt", "not a recognised computation format"):
        xs.load_computation(tmp_path / "x.txt")


# -- the schema, and when it cannot be had -----------------------------------------------------------
@pytest.fixture
def fresh_schema() -> Iterator[None]:
    protodesc.message_class.cache_clear()
    protodesc._pool.cache_clear()
    yield
    protodesc.message_class.cache_clear()
    protodesc._pool.cache_clear()


def test_without_protobuf_the_error_says_what_to_install(small_text: str, tmp_path: Any,
                                                         monkeypatch: pytest.MonkeyPatch, fresh_schema: None) -> None:
    monkeypatch.setitem(sys.modules, "google.protobuf", None)
    message = _error(tmp_path, small_text, "snap.txt")
    assert 'pip install "xlasdk[snapshots]"' in message and "snap.txt" in message, message
    code, _, err = _cli("run", str(tmp_path / "snap.txt"))
    assert code == 2 and 'pip install "xlasdk[snapshots]"' in err


def test_without_the_descriptor_the_error_says_how_to_dump_binary(small_text: str, tmp_path: Any,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  fresh_schema: None) -> None:
    monkeypatch.setattr(protodesc, "_jaxlib_libraries", lambda: [])
    message = _error(tmp_path, small_text)
    assert "xla/service/hlo.proto is not in the installed jaxlib" in message, message
    assert "without --xla_dump_hlo_as_text" in message


def test_the_descriptor_walk_stops_at_the_next_file() -> None:
    """Two descriptors back to back (as in a library's data): the walk ends exactly at the first's end."""
    from google.protobuf import any_pb2, timestamp_pb2

    first, second = any_pb2.DESCRIPTOR.serialized_pb, timestamp_pb2.DESCRIPTOR.serialized_pb
    assert protodesc._descriptor_end(first + second, 0) == len(first)
    assert protodesc._descriptor_end(first + b"\x00" * 8, 0) == len(first)
    assert protodesc._descriptor_end(b"\n\x05", 0) == 0  # a truncated field: nothing


def test_the_schema_is_jaxlib_s_own(step_dumps: dict[str, Any]) -> None:
    """Every field of XLA's binary snapshot is in the schema: its text (which drops unknown fields)
    parses back to the same message (deterministic bytes: maps sorted; unknown fields would count)."""
    for key, name in (("opt_bin", "xla.HloSnapshot"), ("unopt_bin", "xla.HloUnoptimizedSnapshot")):
        cls = protodesc.message_class(name)
        msg = cls.FromString(open(step_dumps[key], "rb").read())
        again = text_format.Parse(text_format.MessageToString(msg), cls())
        assert again.SerializeToString(deterministic=True) == msg.SerializeToString(deterministic=True), key
    fields = protodesc.message_class("xla.HloSnapshot").DESCRIPTOR.fields_by_number
    assert {n: fields[n].name for n in (1, 2, 3, 4)} == {1: "hlo", 2: "arguments", 3: "result",
                                                         4: "execution_platform"}
