"""Inputs files, output names, non-UTF-8 names and a worker that cannot start (issue 31, findings 5 and 6).

Each test reproduced its finding first: ``--input x=FIFO`` and ``--inputs FIFO`` blocked forever;
a zip member without ``.npy``, an .npy header claiming ``(10**30,)`` elements, a truncated .npz,
a ``__dtypes__`` entry nested 100,000 deep were internal errors (exit 1, a raw exception); a
header claiming 4 TiB was blamed on the program ("add.hlo: the run needs more memory"); a zip
bomb was inflated whole before its shape was compared; ``--output ''`` wrote ``./.npz`` and
``--output /dev/full`` created ``/dev/full.npz``; ``module @"a\\FFb"`` and a custom call's
``backend_config = "\\FF"`` raised nanobind's raw ``RuntimeError``; a worker that could not start
was reported as "XLA aborted while loading this module". The files are made here (numpy,
zipfile and hand-written headers are the oracles of what each claims); every read runs under
an alarm, so a read that blocks fails instead of hanging the suite.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from tests.campaigns import hostile_inputs as hi
from tests.test_cli import cli
from xlasdk.cli import _npfiles


@pytest.fixture(autouse=True)
def _alarm() -> Iterator[None]:
    def _blocked(signum: int, frame: object) -> None:
        raise TimeoutError("blocked for 60 s: an inputs file was opened or read in a way that waits")

    old = signal.signal(signal.SIGALRM, _blocked)
    signal.alarm(60)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture()
def program(tmp_path: Path) -> Path:
    p = tmp_path / "add.hlo"
    p.write_text(hi.PROGRAM)
    return p


def _one_error(err: str, *words: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("xlasdk run: error: "), err
    assert "Traceback" not in err and "internal error" not in err, err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def _run(program: Path, *flags: str) -> tuple[int, str, str]:
    return cli("run", str(program), *flags)


# -- special files -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--input", "--inputs"])
def test_a_fifo_as_inputs_is_refused_before_a_byte_is_read(program: Path, tmp_path: Path, flag: str) -> None:
    fifo = tmp_path / "in.npz"
    os.mkfifo(fifo)
    arg = f"x={fifo}" if flag == "--input" else str(fifo)
    code, _, err = _run(program, flag, arg)
    assert code == 2
    _one_error(err, str(fifo), "is a FIFO, not a regular file")


@pytest.mark.parametrize("flag", ["--input", "--inputs"])
def test_dev_zero_and_a_directory_as_inputs_are_refused(program: Path, tmp_path: Path, flag: str) -> None:
    for path, kind in (("/dev/zero", "is a character device"), (str(tmp_path), "is a directory")):
        code, _, err = _run(program, flag, f"x={path}" if flag == "--input" else path)
        assert code == 2
        _one_error(err, path, kind, "not a regular file")


# -- .npy headers --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("shape", "words"), [
    ((1 << 40,), ["<f4[1099511627776]", "4.0 TiB", "more than the limit", "XLASDK_MAX_FILE_BYTES"]),
    ((10**30,), ["shape (1000000000000000000000000000000,)", "more elements than numpy can address"]),
    ((-1,), ["shape (-1,)", "whole numbers >= 0"]),
    ((0, 10**30), ["shape (0, 1000000000000000000000000000000)", "more elements than numpy can address"]),
    ((4.0,), ["shape (4.0,)"]),
    ((5,), ["truncated", "<f4[5], 20 bytes", "16 bytes of data"]),
])
def test_an_npy_header_that_lies_is_refused_naming_the_file(program: Path, tmp_path: Path, shape: object,
                                                             words: list[str]) -> None:
    f = tmp_path / "x.npy"
    f.write_bytes(hi.npy(shape, data=b"\0" * 16))
    code, _, err = _run(program, "--input", f"x={f}")
    assert code == 2
    _one_error(err, "--input x: ", str(f), *words)


def test_pickles_and_unknown_dtypes_are_refused(program: Path, tmp_path: Path) -> None:
    for descr, words in (("|O", "Python objects"), ("zz", "dtype zz is not one numpy reads")):
        f = tmp_path / "x.npy"
        f.write_bytes(hi.npy((4,), descr, data=b"\0" * 32))
        code, _, err = _run(program, "--input", f"x={f}")
        assert code == 2
        _one_error(err, str(f), words)


def test_a_valid_npy_and_npz_still_run(program: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.arange(4, dtype=np.float32))
    np.savez(tmp_path / "in.npz", x=np.arange(4, dtype=np.float32))
    np.savez_compressed(tmp_path / "c.npz", x=np.asfortranarray(np.arange(4, dtype=np.float32)))
    for flags in (["--input", f"x={tmp_path / 'x.npy'}"], ["--inputs", str(tmp_path / "in.npz")],
                  ["--inputs", str(tmp_path / "c.npz")], ["--input", f"x={tmp_path / 'in.npz'}:x"]):
        code, out, err = _run(program, *flags, "--output", str(tmp_path / "out.npz"))
        assert code == 0, err
        assert "[0., 2., 4., 6.]" in out, out
        np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["output_0"], np.arange(4) * 2.0)


# -- .npz archives -------------------------------------------------------------------------------------------------
def test_a_zip_member_without_npy_is_refused(program: Path, tmp_path: Path) -> None:
    f = tmp_path / "in.npz"
    f.write_bytes(hi.npz({"x": hi.valid_npy()}))
    code, _, err = _run(program, "--inputs", str(f))
    assert code == 2
    _one_error(err, str(f), "member 'x' is not an .npy array")


def test_a_truncated_and_a_bad_crc_npz_are_refused(program: Path, tmp_path: Path) -> None:
    good = hi.valid_npz()
    f = tmp_path / "cut.npz"
    f.write_bytes(good[: len(good) // 2])
    code, _, err = _run(program, "--inputs", str(f))
    assert code == 2
    _one_error(err, str(f), "not a readable .npz file", "damaged or truncated zip archive")
    g = tmp_path / "crc.npz"
    g.write_bytes(hi._bad_crc(good))
    code, _, err = _run(program, "--inputs", str(g))
    assert code == 2
    _one_error(err, f"{g}[x]", "Bad CRC-32")


def test_a_zip_bomb_is_refused_before_it_inflates(program: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """256 MiB of zeros in 256 KiB: the member's header (f32[67108864]) is compared with the
    parameter (f32[4]) before any data inflates; reading the archive's members reads their
    headers only (counted here on zipfile's reader)."""
    f = tmp_path / "bomb.npz"
    f.write_bytes(hi.zip_bomb(256 << 20))
    assert f.stat().st_size < 1 << 20
    read = [0]
    real = zipfile.ZipExtFile.read

    def counting(self: zipfile.ZipExtFile, n: int | None = -1) -> bytes:
        data = real(self, n)
        read[0] += len(data)
        return data

    monkeypatch.setattr(zipfile.ZipExtFile, "read", counting)
    members = _npfiles.npz_members(str(f), "--inputs")
    assert [(k, m.shape, m.dtype) for k, m in members] == [("x", (1 << 26,), np.dtype("<f4"))]
    assert read[0] < 1 << 16, read[0]
    t0 = time.monotonic()
    code, _, err = _run(program, "--inputs", str(f))
    assert code == 2
    _one_error(err, "must be f32[4]", f"{f}[x] holds f32[67108864]")
    assert time.monotonic() - t0 < 30


def test_an_npz_whose_members_claim_more_than_the_limit_is_refused(program: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "bomb.npz"
    f.write_bytes(hi.zip_bomb(64 << 20))
    monkeypatch.setenv("XLASDK_MAX_FILE_BYTES", str(1 << 20))
    code, _, err = _run(program, "--inputs", str(f))
    assert code == 2
    _one_error(err, str(f), "inflate to 67,108,", "more than the limit of 1,048,576 bytes")


@pytest.mark.parametrize("manifest", ["[" * 100_000 + "]" * 100_000, '{"x": 1}', "[]"])
def test_a_hostile_dtypes_manifest_is_refused(program: Path, tmp_path: Path, manifest: str) -> None:
    f = tmp_path / "in.npz"
    f.write_bytes(hi.valid_npz({"__dtypes__.npy": hi.manifest(manifest)}))
    code, _, err = _run(program, "--inputs", str(f))
    assert code == 2
    _one_error(err, f"{f}[__dtypes__]", "not a dtype manifest")


def test_a_bf16_output_reads_back_through_its_manifest(tmp_path: Path) -> None:
    import ml_dtypes

    b = xs.XlaBuilder("half")
    from xlasdk import ops

    p = ops.Parameter(b, 0, xs.Shape.array_shape(ml_dtypes.bfloat16, (3,)), "p")
    prog = tmp_path / "half.hlo"
    prog.write_text(b.build(ops.Add(p, p)).as_hlo_text())
    buf = io.BytesIO()
    np.save(buf, np.array([1, 2, 3], ml_dtypes.bfloat16).view("V2"))
    f = tmp_path / "in.npy"
    f.write_bytes(buf.getvalue())
    code, out, err = cli("run", str(prog), "--input", f"p={f}", "--output", str(tmp_path / "o.npz"))
    assert code == 0, err
    z = np.load(tmp_path / "o.npz")
    assert z["output_0"].dtype == np.dtype("V2") and "bfloat16" in str(z["__dtypes__"])
    code, out, err = cli("run", str(prog), "--inputs", str(tmp_path / "o.npz"))  # output_0 -> p, as bfloat16
    assert code == 0, err
    assert "[4, 8, 12]" in out.replace(".", ""), out


# -- --output names ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("output", "words"), [
    ("", ["--output '': an empty file name"]),
    ("/dev/full", ["--output /dev/full: /dev/full is a character device, not a regular file"]),
    ("DIR/", ["names a directory, not a file"]),
])
def test_empty_and_special_output_names_are_refused(program: Path, tmp_path: Path, output: str,
                                                    words: list[str]) -> None:
    if not os.path.exists("/dev/full") and output == "/dev/full":
        pytest.skip("no /dev/full here")
    output = output.replace("DIR/", f"{tmp_path}/")
    np.save(tmp_path / "x.npy", np.arange(4, dtype=np.float32))
    before = set(os.listdir(os.getcwd())), os.path.exists("/dev/full.npz")
    code, _, err = _run(program, "--input", f"x={tmp_path / 'x.npy'}", "--output", output)
    assert code == 2
    _one_error(err, *words)
    assert (set(os.listdir(os.getcwd())), os.path.exists("/dev/full.npz")) == before


# -- names and configs that are not UTF-8 --------------------------------------------------------------------------
NOT_UTF8_NAME = """module @"a\\FFb" {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""
NOT_UTF8_CONFIG = """func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @foo(%arg0) {backend_config = "\\FF\\FE"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def test_a_module_name_that_is_not_utf8_is_shown_escaped(tmp_path: Path) -> None:
    f = tmp_path / "m.mlir"
    f.write_text(NOT_UTF8_NAME)
    comp = xs.load_computation(f)
    assert comp.name == "a\\xffb"
    assert [i.opcode for i in comp.instructions()] == ["parameter", "stablehlo.add"]
    assert "HloModule a_b" in comp.as_hlo_text()
    code, out, err = cli("inspect", str(f))
    assert code == 0 and "RuntimeError" not in err, err


def test_an_hlo_proto_whose_module_name_is_not_utf8_is_refused_saying_so(tmp_path: Path) -> None:
    good = tmp_path / "good.pb"
    good.write_bytes(_proto_of(hi.PROGRAM))
    data = good.read_bytes()
    assert data.startswith(b"\n\x03add")
    bad = tmp_path / "bad.pb"
    bad.write_bytes(data.replace(b"\n\x03add", b"\n\x03a\xffd", 1))
    assert xs.load_computation(good).name == "add"
    with pytest.raises(xs.FormatError, match=r"bad.pb: .*the module's name b'a\\xffd' is not UTF-8 text"):
        xs.load_computation(bad)


def _proto_of(text: str) -> bytes:
    from xlasdk.formats.load import computation_from_hlo_text

    return computation_from_hlo_text(text).as_serialized_hlo_module_proto()


def test_a_backend_config_that_is_not_utf8_is_shown_escaped(tmp_path: Path) -> None:
    f = tmp_path / "m.mlir"
    f.write_text(NOT_UTF8_CONFIG)
    comp = xs.load_computation(f)
    call = comp.instructions()[-1]
    assert call.attributes["backend_config"] == "\\xff\\xfe"
    assert 'backend_config="\\377\\376"' in comp.as_hlo_text() or "backend_config" in comp.as_hlo_text()


# -- a worker that cannot start ------------------------------------------------------------------------------------
@pytest.mark.parametrize("executable", ["/nonexistent/python", "/bin/false"])
def test_a_worker_that_cannot_start_is_not_blamed_on_the_file(tmp_path: Path, executable: str) -> None:
    if not os.path.exists("/bin/false") and executable == "/bin/false":
        pytest.skip("no /bin/false here")
    f = tmp_path / "m.hlo"
    f.write_text(hi.PROGRAM)
    code = (f"import sys; sys.executable = {executable!r}\n"
            "import xlasdk as xs\n"
            "try:\n"
            f"    xs.load_computation({str(f)!r})\n"
            "except xs.XlaSdkError as e:\n"
            "    print(type(e).__name__, e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "XLASDK_LOAD_CACHE": "0"})
    line = proc.stdout.strip()
    assert line.startswith("XlaSdkError "), (line, proc.stderr[-2000:])
    assert "FormatError" not in line and "XLA aborted" not in line, line
    assert "could not begin" in line and "nothing is known about the file" in line, line
    assert str(f) in line
