"""XLA's optimized dump of a JAX program on a 2x2 mesh (``tests/data/spmd/mesh2x2``, remade by
``tools/make_spmd_mesh_fixture.py``): one partition's program, whose all-reduce combiner wrote a
variadic ``(f32[], f32[3]) all-reduce(a, b)`` (issue 36 item 2).

Oracles: JAX's own values, recorded by the script (global outputs, and each device's shard of them):
bit for bit on the host that recorded them, within 4 ulps on others (XLA:CPU compiles for the host's CPU:
an AMD EPYC gives up to 15 ulps of an element, under 1 ulp of the output's largest element:
``tests.helpers.assert_same_or_within_ulps``); and, for what the CLI does to the values (splitting global
inputs, putting outputs together, per-partition inputs), the same optimized module run on this host
partition by partition with ``execute_replicated``, bit for bit."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import assert_same_bits, assert_same_or_within_ulps
from xlasdk.cli import main

DATA = Path(__file__).parent / "data" / "spmd" / "mesh2x2"
AFTER = DATA / "module.cpu_after_optimizations.txt"
BEFORE = DATA / "module.before_optimizations.txt"


@pytest.fixture(scope="module")
def io_npz() -> Any:
    return np.load(DATA / "io.npz")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


#: The CLI's --expect verdict: ": MATCH (bit-exact)" on the host that recorded JAX's outputs (jaxlib 0.10.2),
#: ": MATCH" within rounding elsewhere (another CPU; XLA of jaxlib 0.11+ sums in another order), never MISMATCH.
MATCH_TEXT = ": MATCH"


def on_this_host(after: Path, ins: list[Any], n: int) -> list[list[np.ndarray[Any, Any]]]:
    """The optimized module run here by ``execute_replicated`` on JAX's pieces of ``ins``, as split by its
    parameters' shardings: each partition's outputs (the oracle for what the CLI does to the values)."""
    comp = xs.load_computation(after)
    shardings = [xs.HloSharding.parse(s or "{replicated}") for s in comp.partitioning().parameter_shardings]
    exe = xs.compile(comp, xs.client("cpu", num_devices=n).devices()[0])
    assert (exe.num_replicas, exe.num_partitions) == (1, n)
    per_device = [[a[s.shard_slices(a.shape, n)[k]] for a, s in zip(ins, shardings, strict=True)] for k in range(n)]
    return [[o.to_numpy() for o in out] for out in exe.execute_replicated(per_device)]  # type: ignore[union-attr]


def assert_put_together(
    got: np.ndarray[Any, Any], pieces: list[np.ndarray[Any, Any]], sharding: str | None, what: str
) -> None:
    """``got``'s piece on each partition (by the result ``sharding``) is that partition's output, bit for bit."""
    assert sharding is not None, what
    slices = xs.HloSharding.parse(sharding).shard_slices(got.shape, len(pieces))
    for k, piece in enumerate(pieces):
        assert_same_bits(got[slices[k]], piece, f"{what}, partition {k}")


@pytest.fixture(scope="module")
def host(io_npz: Any) -> list[list[np.ndarray[Any, Any]]]:
    return on_this_host(AFTER, [io_npz["in0"], io_npz["in1"]], 4)


def test_the_dump_holds_a_variadic_all_reduce() -> None:
    text = AFTER.read_text()
    assert ") all-reduce(" in text and "use_global_device_ids=true" in text and "replica_groups=mesh[" in text


def test_optimized_dump_with_a_variadic_all_reduce_compiles_and_runs_as_jax_ran_it(
    io_npz: Any, host: list[list[np.ndarray[Any, Any]]]
) -> None:
    """It failed to compile: ``spmd_partitioner.cc ... supports only single-operand allreduce in manual
    partitioning mode``. Each device, on JAX's pieces of the inputs, computes JAX's pieces of the outputs
    (within 4 ulps off the recording host; an error of 1e-3 relative is caught)."""
    for k, out in enumerate(host):
        assert len(out) == 3
        for i, o in enumerate(out):
            assert_same_or_within_ulps(o, io_npz[f"out{i}_d{k}"], what=f"partition {k} output {i}")
    planted = host[0][2].copy()
    planted[1, 1] *= 1 + 1e-3
    with pytest.raises(AssertionError, match="ulps off"):
        assert_same_or_within_ulps(planted, io_npz["out2_d0"])


def test_run_with_global_inputs_serves_both_files(
    io_npz: Any, host: list[list[np.ndarray[Any, Any]]], tmp_path: Path
) -> None:
    """The same --inputs file runs the before- and the after-optimizations files; the optimized one's
    global inputs are split by its parameters' shardings and its outputs put together by the result
    shardings of the before_optimizations file beside it: JAX's outputs (within 4 ulps off the recording
    host), and for the optimized file each partition's outputs run here, bit for bit."""
    result_shardings = xs.load_computation(BEFORE).partitioning().result_shardings
    inputs, expect = tmp_path / "in.npz", tmp_path / "expect.npz"
    np.savez(inputs, x=io_npz["in0"], w=io_npz["in1"])
    np.savez(expect, **{f"output_{i}": io_npz[f"out{i}"] for i in range(3)})
    for path in (AFTER, BEFORE):
        out = tmp_path / f"{path.stem}.npz"
        code, text, err = cli("run", str(path), "--inputs", str(inputs), "--expect", str(expect), "--output", str(out))
        assert code == 0, err
        assert MATCH_TEXT in text, text
        with np.load(out) as got:
            for i in range(3):
                assert_same_or_within_ulps(got[f"output_{i}"], io_npz[f"out{i}"], what=f"{path.name} output {i}")
                if path == AFTER:
                    assert_put_together(got[f"output_{i}"], [out[i] for out in host], result_shardings[i],
                                        f"output {i}")
    code, text, _ = cli("run", str(AFTER), "--inputs", str(inputs))
    assert "an optimized per-partition dump) on 4 cpu devices" in text and "global inputs split" in text
    assert f"outputs put together by the result shardings of {BEFORE}" in text
    assert "output 2: f32[16,6]" in text and "sharding {devices=[2,2]<=[4]}" in text


def test_run_with_per_partition_inputs(io_npz: Any, host: list[list[np.ndarray[Any, Any]]], tmp_path: Path) -> None:
    """Each partition's own arrays, stacked on a leading axis: each partition's outputs, stacked (bit for
    bit those of the module run here partition by partition; within 4 ulps of JAX's)."""
    comp = xs.load_computation(AFTER)
    shardings = [xs.HloSharding.parse(s) for s in comp.partitioning().parameter_shardings]
    stacked = [np.stack([a[s.shard_slices(a.shape, 4)[k]] for k in range(4)])
               for a, s in zip([io_npz["in0"], io_npz["in1"]], shardings, strict=True)]
    inputs, out = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, x=stacked[0], w=stacked[1])
    code, text, err = cli("run", str(AFTER), "--inputs", str(inputs), "--output", str(out))
    assert code == 0, err
    assert "per-partition inputs" in text and "outputs per partition (a leading axis of 4)" in text
    with np.load(out) as got:
        for i in range(3):
            for k in range(4):
                assert_same_bits(got[f"output_{i}"][k], host[k][i], f"output {i} partition {k}")
                assert_same_or_within_ulps(got[f"output_{i}"][k], io_npz[f"out{i}_d{k}"], what=f"{i}, {k}")
    # one partition's arrays: every partition gets them
    np.savez(inputs, x=stacked[0][1], w=stacked[1][1])
    code, text, err = cli("run", str(AFTER), "--inputs", str(inputs), "--output", str(out))
    assert code == 0, err
    with np.load(out) as got:
        assert got["output_2"].shape == (4, 8, 3)
        assert_same_bits(got["output_2"][1], host[1][2], "output 2 partition 1")


def test_run_says_what_to_give(io_npz: Any, tmp_path: Path) -> None:
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=io_npz["in0"][:5], w=io_npz["in1"])
    code, _, err = cli("run", str(AFTER), "--inputs", str(inputs))
    assert code == 2, err
    assert "must be f32[16,8]" in err and "optimized per-partition dump (one partition's program of 4)" in err, err
    assert "give the program's global arrays (x: f32[16,8], w: f32[8,6])" in err and "stacked on a leading axis" in err


def test_without_the_before_file_outputs_stay_per_partition(
    io_npz: Any, host: list[list[np.ndarray[Any, Any]]], tmp_path: Path
) -> None:
    """The optimized module does not record its result shardings: without the before_optimizations
    file beside it, each partition's outputs are written (never a guess at how they fit together)."""
    alone = tmp_path / "module.cpu_after_optimizations.txt"
    shutil.copy(AFTER, alone)
    inputs, out = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, x=io_npz["in0"], w=io_npz["in1"])
    code, text, err = cli("run", str(alone), "--inputs", str(inputs), "--output", str(out))
    assert code == 0, err
    assert "outputs per partition (a leading axis of 4): the optimized module does not record" in text
    with np.load(out) as got:
        for k in range(4):
            assert_same_bits(got["output_1"][k], host[k][1], f"output 1 partition {k}")
            assert_same_or_within_ulps(got["output_1"][k], io_npz[f"out1_d{k}"], what=f"output 1 partition {k}")


def test_sharded_mlp_optimized_dump_runs_from_global_inputs(tmp_path: Path) -> None:
    """The corpus' other per-partition dump (a single-operand all-reduce), from its global inputs."""
    from tests.test_real_dumps import assert_matches_jax, recorded

    ins, want = recorded("dumps/sharded_mlp")
    inputs, out = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, **{str(i): a for i, a in enumerate(ins)})
    path = Path(__file__).parent / "data" / "dumps" / "sharded_mlp" / "module.cpu_after_optimizations.txt"
    code, text, err = cli("run", str(path), "--inputs", str(inputs), "--output", str(out))
    assert code == 0, err
    # its before_optimizations file leaves the results to XLA's propagation: compiled, it says which
    assert "outputs put together by the result shardings XLA gives" in text, text
    assert "output 0: f32[16,4]" in text and "sharding {devices=[4,1]<=[4]}" in text, text
    with np.load(out) as got:
        assert_matches_jax([got["output_0"], got["output_1"]], want, "sharded_mlp after optimizations")


def test_the_8_device_fixture_runs_from_global_inputs(tmp_path: Path) -> None:
    """tests/data/spmd (a 2x4 mesh, replicated subgroups on both parameters and results): the optimized
    dump from the global inputs: JAX's outputs (within 4 ulps off the recording host), and each partition's
    outputs of the module run here, bit for bit."""
    spmd = DATA.parent
    z = np.load(spmd / "io.npz")
    inputs, expect, out = tmp_path / "in.npz", tmp_path / "expect.npz", tmp_path / "out.npz"
    np.savez(inputs, a=z["in0"], w=z["in1"], v=z["in2"])
    np.savez(expect, output_0=z["out0"], output_1=z["out1"])
    after = spmd / "module.after_optimizations.txt"
    code, text, err = cli("run", str(after), "--inputs", str(inputs), "--expect", str(expect), "--output", str(out))
    assert code == 0, err
    assert "on 8 cpu devices (1 replica x 8 partitions)" in text and MATCH_TEXT in text, text
    host = on_this_host(after, [z["in0"], z["in1"], z["in2"]], 8)
    result_shardings = xs.load_computation(spmd / "module.before_optimizations.txt").partitioning().result_shardings
    with np.load(out) as got:
        for i in range(2):
            assert_same_or_within_ulps(got[f"output_{i}"], z[f"out{i}"], what=f"output {i}")
            assert_put_together(got[f"output_{i}"], [o[i] for o in host], result_shardings[i], f"output {i}")


def test_inspect_says_what_the_command_can_do_for_a_per_partition_dump(tmp_path: Path) -> None:
    """Issue 47: ``xlasdk inspect`` of one partition's program (4 partitions) on a 1-device CPU client
    ended with the API's hint ``for CPU use xs.client('cpu', num_devices=4)``, which the command
    cannot act on. It names what the command can do, and each way works: XLA_FLAGS for 4 CPU
    devices (in a fresh process: this one's client has its devices already), or --no-compile."""
    import os
    import subprocess
    import sys

    code, out, err = cli("inspect", str(AFTER))
    assert code == 2 and not out, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "the program runs on 4 devices" in lines[0], err
    assert "set XLA_FLAGS=--xla_force_host_platform_device_count=4 for 4 CPU devices" in lines[0], err
    assert "or give --no-compile" in lines[0] and "xs.client" not in lines[0], err
    code, out, err = cli("inspect", str(AFTER), "--no-compile")
    assert code == 0 and "partitioning:" in out, (out, err)
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "PYTHONPATH": str(repo)}
    r = subprocess.run([sys.executable, "-m", "xlasdk.cli", "inspect", str(AFTER)], capture_output=True, text=True,
                       env=env, cwd=repo, timeout=300)
    assert r.returncode == 0 and "cost analysis (cpu:0)" in r.stdout, (r.stdout, r.stderr[-1000:])
