"""``xlasdk run`` on partitioned programs: --devices / --replicas / --partitions, and the counts read
from the module (an XLA dump's HloModule header, StableHLO attributes, the shardings)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk.cli import main
from xlasdk.sharding._spmd import module_spmd_counts

DATA = Path(__file__).parent / "data" / "spmd"
DUMP = DATA / "module.before_optimizations.txt"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def dump_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    z = np.load(DATA / "io.npz")
    path = tmp_path_factory.mktemp("spmd") / "in.npz"
    np.savez(path, a=z["in0"], w=z["in1"], v=z["in2"])
    return path


def test_run_reads_num_partitions_from_an_xla_dump(dump_inputs: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "out.npz"
    code, out, err = cli("run", str(DUMP), "--inputs", str(dump_inputs), "--output", str(out_file))
    assert code == 0, err
    assert "jit_f on 8 cpu devices (1 replica x 8 partitions)" in out
    assert "sharding {devices=[4,2]<=[2,4]T(1,0) last_tile_dim_replicate}" in out
    assert "sharding {devices=[2,4]<=[8]}" in out
    got, want = np.load(out_file), np.load(DATA / "io.npz")
    np.testing.assert_allclose(got["output_0"], want["out0"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["output_1"], want["out1"], rtol=1e-6, atol=1e-6)


def test_run_device_flags(dump_inputs: Path) -> None:
    code, out, err = cli("run", str(DUMP), "--inputs", str(dump_inputs), "--devices", "12", "--device", "cpu:4",
                         "--repeat", "2")
    assert code == 0, err
    assert "on 8 cpu devices" in out and "time per run over 2 runs" in out
    code, _, err = cli("run", str(DUMP), "--inputs", str(dump_inputs), "--devices", "4")
    assert code == 2 and "--devices 4: the program runs on replicas x partitions = 8 devices" in err
    code, _, err = cli("run", str(DUMP), "--inputs", str(dump_inputs), "--devices", "8", "--device", "cpu:2")
    assert code == 2 and "needs 8 devices from there, but the cpu client has 8" in err
    code, _, err = cli("run", str(DUMP), "--inputs", str(dump_inputs), "--partitions", "0")
    assert code == 2 and "argument --partitions: must be an integer >= 1" in err
    code, _, err = cli("run", str(DUMP), "--inputs", str(dump_inputs), "--partitions", "4")
    assert code == 1 and "tile_assignment should have 4 devices but has 8" in err


def _built(tmp_path: Path, suffix: str) -> tuple[Path, xs.XlaComputation]:
    b = xs.XlaBuilder("rows")
    with b.sharding("{devices=[4,1]<=[4]}"):
        x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (8, 3)), "x")
        y = ops.Mul(x, x)
    comp = b.build(y)
    path = tmp_path / f"rows{suffix}"
    comp.save(path)
    return path, comp


@pytest.mark.parametrize("suffix", [".mlir", ".pb", ".hlo"])
def test_run_infers_partitions_from_shardings(tmp_path: Path, suffix: str) -> None:
    path, comp = _built(tmp_path, suffix)
    assert module_spmd_counts(xs.load_computation(path)) == (None, 4)
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    np.save(tmp_path / "x.npy", x)
    code, out, err = cli("run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--output", str(tmp_path / "o.npz"))
    assert code == 0, err
    assert "rows on 4 cpu devices (1 replica x 4 partitions)" in out and "sharding {devices=[4,1]<=[4]}" in out
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["output_0"], x * x)


def test_run_with_replicas(tmp_path: Path) -> None:
    b = xs.XlaBuilder("rep")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (4,)), "x")
    comp = b.build(ops.Add(x, ops.ConvertElementType(ops.ReplicaId(b), np.float32)))
    path = tmp_path / "rep.hlo"
    comp.save(path)
    assert module_spmd_counts(xs.load_computation(path), path.read_text()) == (None, None)
    code, out, err = cli("run", str(path), "--random-inputs", "--replicas", "2", "--output", str(tmp_path / "o.npz"))
    assert code == 0, err
    assert "rep on 2 cpu devices (2 replicas x 1 partition)" in out and "sharding {replicated}" in out
    code, out, err = cli("run", str(path), "--random-inputs")
    assert code == 0 and "rep on cpu:0" in out  # one device: as before


def test_module_counts_from_headers_and_attributes() -> None:
    comp = xs.load_computation(DUMP)
    text = DUMP.read_text()
    assert module_spmd_counts(comp, text) == (None, 8)
    assert module_spmd_counts(comp, text.replace("num_partitions=8", "replica_count=2, num_partitions=8", 1)) == (2, 8)
    stablehlo: Any = xs.XlaComputation.from_stablehlo(
        "module @m attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 3 : i32} {\n"
        "  func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "    return %a : tensor<4xf32>\n  }\n}\n"
    )
    assert module_spmd_counts(stablehlo) == (3, 2)
