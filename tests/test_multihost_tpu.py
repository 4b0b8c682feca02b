"""Multi-host TPU as JAX does it, tested without a chip: the TPU client of a job gets the distributed
runtime client (``xs.distributed.initialize`` first), the order is enforced, and ``xs.topology``'s
compile for a whole slice gives each host (process index) its part. libtpu is a test-only peer: the
tests that need it skip without it. What needs a pod is written down in xlasdk/launch.py."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops

ROOT = Path(__file__).resolve().parents[1]
needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="libtpu is not installed")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLASDK_", "JAX_"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _script(body: str, timeout: float = 240) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    """Run ``body`` in a fresh interpreter; its last stdout line is a JSON report."""
    prelude = textwrap.dedent("""
        import json, socket, sys
        import xlasdk as xs
        from xlasdk._jaxlib import pjrt

        def free_port():
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                return s.getsockname()[1]
    """)
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(body)], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT, env=_env())
    lines = [x for x in r.stdout.splitlines() if x.startswith("{")]
    return r, (json.loads(lines[-1]) if lines else {})


def _lived(r: subprocess.CompletedProcess[str]) -> None:
    """The process ended by itself with 0 (not by a signal: XLA's aborts are SIGABRT)."""
    assert r.returncode == 0, (r.returncode, r.stderr[-1500:])


# -- the TPU client of a job ---------------------------------------------------------------------------
@needs_libtpu
def test_the_tpu_client_of_a_job_gets_the_distributed_client_and_no_node_options() -> None:
    """Under ``xs.distributed.initialize`` the TPU plugin's client is made with the job's distributed
    runtime client (the very object the job holds), as JAX's ``make_tpu_client``; libtpu itself
    judges the options: it refuses ``node_id`` / ``num_nodes`` (which xlasdk passed before: the
    client of a pod then failed with INVALID_ARGUMENT) before it looks for a chip, so on this
    chipless machine the error must be the missing chip, and the process lives."""
    r, out = _script("""
        seen = []
        real = pjrt.make_plugin_client

        def observed(name, options, distributed_client=None):
            seen.append((name, dict(options or {}), distributed_client))
            return real(name, options, distributed_client)

        pjrt.make_plugin_client = observed
        xs.distributed.initialize(f"127.0.0.1:{free_port()}", 1, 0, join_timeout=60)
        dc = xs.distributed._state.dc
        try:
            xs.devices("tpu")
            error = None
        except xs.XlaSdkError as e:
            error = [type(e).__name__, str(e)]
        xs.distributed.shutdown()
        print(json.dumps({"error": error, "calls": [[n, sorted(o), c is dc] for n, o, c in seen]}))
    """)
    _lived(r)
    assert out["calls"] == [["tpu", ["ml_framework_name", "ml_framework_version"], True]], out
    kind, message = out["error"]  # type: ignore[misc]
    assert kind == "PluginError" and "no TPU chip" in message and "Unexpected option" not in message, message


@needs_libtpu
def test_a_tpu_client_without_a_job_gets_no_distributed_client() -> None:
    r, out = _script("""
        seen = []
        real = pjrt.make_plugin_client

        def observed(name, options, distributed_client=None):
            seen.append(distributed_client is None)
            return real(name, options, distributed_client)

        pjrt.make_plugin_client = observed
        try:
            xs.devices("tpu")
        except xs.PluginError as e:
            print(json.dumps({"none": seen, "error": str(e)}))
    """)
    _lived(r)
    assert out["none"] == [True] and "no TPU chip" in str(out["error"]), out


@needs_libtpu
def test_initialize_after_the_tpu_client_exists_is_an_xlasdk_error() -> None:
    """The TPU client made first belongs to this host alone: initialize refuses, as JAX's does, and
    names the client. (No chip here: the plugin's client is stood in for by a CPU client, through
    xlasdk's own seam, after libtpu really loaded.)"""
    r, out = _script("""
        pjrt.make_plugin_client = lambda name, options, distributed_client=None: pjrt.make_cpu_client(1)
        assert xs.client("tpu").name == "tpu"
        try:
            xs.distributed.initialize(f"127.0.0.1:{free_port()}", 1, 0, join_timeout=60)
            error = None
        except xs.DistributedError as e:
            error = str(e)
        print(json.dumps({"error": error, "initialized": xs.distributed.is_initialized()}))
    """)
    _lived(r)
    assert out["initialized"] is False, out
    assert "before the first use of a TPU" in str(out["error"]) and "'tpu'" in str(out["error"]), out


def test_a_tpu_client_that_places_the_host_elsewhere_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """libtpu numbers a pod's hosts itself (the TPU worker number): a job whose process_id disagrees
    would feed one host's devices with another's data; the client is refused (a CPU client, process
    index 0, stands in for libtpu's through xlasdk's seam)."""
    from xlasdk._jaxlib import distributed, pjrt

    made: list[object] = []
    monkeypatch.setattr(pjrt, "make_plugin_client",
                        lambda name, options, dc=None: made.append(options) or pjrt.make_cpu_client(1))
    with pytest.raises(xs.XlaRuntimeError, match="process index 0, but the job gave it process_id 1.*TPU_WORKER_ID"):
        distributed.make_plugin_client("tpu", None, None, 1, 2)
    assert made == [{}]  # no node_id / num_nodes for libtpu
    assert distributed.make_plugin_client("cuda", None, None, 0, 2) is not None
    assert made[-1] == {"node_id": 0, "num_nodes": 2}


def test_initialize_after_the_cpu_client_exists_is_fine() -> None:
    """The CPU client is the one initialize replaces: using it first is allowed (the README's examples)."""
    r, out = _script("""
        xs.devices()
        xs.distributed.initialize(f"127.0.0.1:{free_port()}", 1, 0, join_timeout=60)
        n = len(xs.devices())
        xs.distributed.shutdown()
        print(json.dumps({"devices": n}))
    """)
    _lived(r)
    assert out == {"devices": 1}


# -- each host's part of a program compiled for a whole slice ------------------------------------------
def _f32(*dims: int) -> xs.Shape:
    return xs.Shape.array_shape(np.float32, dims)


def _contracting_split_matmul(n: int) -> xs.XlaComputation:
    """x @ w with the contracting dimension split over ``n`` partitions: the replicated result needs
    an all-reduce over every partition (across every host)."""
    b = xs.XlaBuilder(f"mm{n}")
    with b.sharding(f"{{devices=[1,{n}]<=[{n}]}}"):
        x = ops.Parameter(b, 0, _f32(16, 16 * n), "x")
    with b.sharding(f"{{devices=[{n},1]<=[{n}]}}"):
        w = ops.Parameter(b, 1, _f32(16 * n, 128), "w")
    with b.sharding("{replicated}"):
        y = ops.Dot(x, w)
    return b.build(y)


def _host_of(coords: tuple[int, int, int]) -> int:
    """The oracle: a v5e host holds a 2x2 block of chips (libtpu's default ``chips_per_host_bounds``),
    numbered x first across the 4x4 slice."""
    x, y, _ = coords
    return x // 2 + 2 * (y // 2)


@needs_libtpu
def test_v5e_4x4_has_four_hosts_of_four_chips() -> None:
    from xlasdk._jaxlib.tpu import device_coords

    topo = xs.topology("v5e:4x4")
    assert len(topo.devices) == 16 and topo.process_count == 4 and topo.num_slices == 1
    for p in range(4):
        mine = topo.local_devices(p)
        coords = [device_coords(d._d) for d in mine]
        assert len(mine) == 4 and all(c is not None and _host_of(c) == p for c in coords), (p, coords)
    with pytest.raises(xs.UnknownDeviceError, match="processes 0 .. 3"):
        topo.local_devices(4)


@needs_libtpu
def test_a_16_partition_program_for_v5e_4x4_gives_four_host_parts(tmp_path: Path) -> None:
    from xlasdk.runtime._serial_format import _parse
    from xlasdk.runtime.host_parts import read_host_part

    topo = xs.topology("v5e:4x4")
    exe = xs.compile(_contracting_split_matmul(16), device=topo.devices[0],
                     options=xs.CompileOptions(num_partitions=16))
    assert "all-reduce" in exe.hlo_text()
    order = [d.id for d in exe.devices]  # the program's device order: partition k runs on order[k]
    parts = exe.host_parts()
    assert [p.process_index for p in parts] == [0, 1, 2, 3]
    whole = exe.serialize()
    seen: list[int] = []
    for part in parts:
        assert sorted(part.local_device_ids) == [d.id for d in topo.local_devices(part.process_index)]
        assert part.logical_ids == tuple((0, order.index(i)) for i in part.local_device_ids)
        assert part.executable == whole and part.process_count == 4 and part.device_kind == "TPU v5 lite"
        seen += [q for _, q in part.logical_ids]
    assert sorted(seen) == list(range(16))  # every partition on exactly one host
    dirs = exe.save_per_host(tmp_path)
    assert [Path(d).name for d in dirs] == [f"process_{k}" for k in range(4)]
    for k, part in enumerate(parts):
        back = read_host_part(tmp_path, k)  # DIR and the process index, as a host reads it
        assert back == part and read_host_part(dirs[k]) == part
        header, blob = _parse(back.executable, "part")
        assert header["platform"] == "tpu" and header["num_partitions"] == 16 and header["device_ids"] == order
        assert len(blob) > 10_000
    assert hashlib.sha256((tmp_path / "process_2" / "executable.xlasdk").read_bytes()).hexdigest() == parts[2].sha256


@needs_libtpu
def test_a_host_part_is_checked_when_read(tmp_path: Path) -> None:
    from xlasdk.runtime.host_parts import read_host_part

    exe = xs.compile(_contracting_split_matmul(4), device=xs.topology("v5e:4x4").devices[0],
                     options=xs.CompileOptions(num_partitions=4))
    parts = exe.host_parts()  # partitions 0..3 on devices 0..3: hosts 0 (0, 1) and 1 (2, 3)
    assert [(p.process_index, p.local_device_ids) for p in parts] == [(0, (0, 1)), (1, (2, 3))]
    d0, _ = exe.save_per_host(tmp_path)
    with pytest.raises(xs.FormatError, match="not of process 1"):
        read_host_part(d0, 1)
    meta = json.loads((Path(d0) / "host.json").read_text())
    meta["local_device_ids"] = [2, 3]  # another host's devices under host 0's logical ids
    (Path(d0) / "host.json").write_text(json.dumps(meta))
    with pytest.raises(xs.FormatError, match=r"\(replica, partition\)"):
        read_host_part(d0)
    exe.save_per_host(tmp_path)
    blob = bytearray((Path(d0) / "executable.xlasdk").read_bytes())
    blob[-100] ^= 1
    (Path(d0) / "executable.xlasdk").write_bytes(bytes(blob))
    with pytest.raises(xs.FormatError, match="sha256"):
        read_host_part(d0)
    with pytest.raises(xs.FormatError, match="cannot read host.json"):
        read_host_part(tmp_path / "process_7")


@needs_libtpu
def test_loading_a_host_part_outside_its_job_is_refused(tmp_path: Path) -> None:
    """On this machine (one process, no TPU) every part of a 4-host program is refused, naming the
    processes: a host never runs another host's partitions."""
    from xlasdk.runtime.host_load import load_host_part

    exe = xs.compile(_contracting_split_matmul(16), device=xs.topology("v5e:4x4").devices[0],
                     options=xs.CompileOptions(num_partitions=16))
    exe.save_per_host(tmp_path)
    with pytest.raises(xs.DistributedError, match=r"process 0's of 4 \(v5e:4x4\), but this is process 0 of 1"):
        load_host_part(tmp_path)
    with pytest.raises(xs.DistributedError, match="process 3's of 4"):
        load_host_part(tmp_path / "process_3")


@needs_libtpu
def test_multi_slice_topologies_compile_and_split_by_host() -> None:
    two = xs.topology("v5e:2x2,num_slices=2")
    assert xs.topology("v5e:2x2", num_slices=2) is two and two.num_slices == 2
    assert len(two.devices) == 8 and two.process_count == 2
    assert [d.id for d in two.local_devices(1)] == [200000, 200001, 200002, 200003]
    exe = xs.compile(_contracting_split_matmul(8), device=two.devices[0], options=xs.CompileOptions(num_partitions=8))
    assert exe.topology == "v5e:2x2,num_slices=2" and "all-reduce" in exe.hlo_text()
    parts = exe.host_parts()
    assert [p.local_device_ids for p in parts] == [(100000, 100001, 100002, 100003), (200000, 200001, 200002, 200003)]
    assert [q for p in parts for _, q in p.logical_ids] == list(range(8))


@pytest.mark.parametrize(("name", "kwargs", "words"), [
    ("v5e:2x2,num_slices=x", {}, "NAME,num_slices=N"),
    ("v5e:2x2,num_slices=2", {"num_slices": 3}, "has 2 slices, but num_slices=3"),
    ("v5e:2x2", {"num_slices": 0}, "at least 1"),
    ("v5e:2x2", {"num_slices": True}, "must be an int"),
])
def test_a_bad_slice_count_is_an_error(name: str, kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(xs.UnknownDeviceError, match=words):
        xs.topology(name, **kwargs)  # type: ignore[arg-type]


# -- a rehearsal of the pod's steps with CPU processes ---------------------------------------------------
_REHEARSAL = '''
import os, sys
import numpy as np
import xlasdk as xs
from xlasdk import ops
from xlasdk.runtime.host_load import load_host_part
from xlasdk.runtime.host_parts import parts_of

out = sys.argv[1]
xs.distributed.initialize()
me, n, P = xs.process_index(), xs.process_count(), len(xs.devices())
b = xs.XlaBuilder("mm")
with b.sharding(f"{{devices=[1,{P}]<=[{P}]}}"):
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (8, 4 * P)), "x")
with b.sharding(f"{{devices=[{P},1]<=[{P}]}}"):
    w = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, (4 * P, 8)), "w")
with b.sharding("{replicated}"):
    y = ops.Dot(x, w)
if me == 0:  # one process compiles and writes every host's part
    exe = xs.compile(b.build(y), options=xs.CompileOptions(num_partitions=P))
    for part in parts_of("cpu", tuple(exe.devices), P, n, exe.serialize()):
        part.save(os.path.join(out, f"process_{part.process_index}"))
xs.distributed.barrier("written", 120)
try:
    load_host_part(os.path.join(out, f"process_{1 - me}"))
    refused = ""
except xs.DistributedError as e:
    refused = str(e)
exe = load_host_part(out)
mine = [k for k, d in enumerate(exe.devices) if d in exe.local_devices]
rng = np.random.default_rng(0)
X = rng.standard_normal((8, 4 * P)).astype(np.float32)
W = rng.standard_normal((4 * P, 8)).astype(np.float32)
got = exe.execute_sharded([X, W])
want = X.astype(np.float64) @ W.astype(np.float64)
ok = len(got.shards) == len(mine) and all(np.allclose(s.to_numpy(), want, rtol=1e-4, atol=1e-4) for s in got.shards)
print(f"REPORT {me} {mine} {'MATCH' if ok else 'MISMATCH'} {'refused' if 'process ' in refused else 'NOT REFUSED'}")
xs.distributed.shutdown()
'''


def test_host_parts_load_and_run_in_a_two_process_cpu_job(tmp_path: Path) -> None:
    """The pod's steps, rehearsed with 2 CPU processes of 2 devices: process 0 compiles a 4-partition
    program (its all-reduce crosses the processes) and writes each process's part; each process
    loads its own with load_host_part (refusing the other's), runs its partitions and gets x @ w
    (numpy's, float64)."""
    script = tmp_path / "rehearsal.py"
    script.write_text(_REHEARSAL)
    r = subprocess.run([sys.executable, "-m", "xlasdk.launch", "-n", "2", "--local-device-count", "2",
                        "--timeout", "240", str(script), str(tmp_path / "parts")], capture_output=True, text=True,
                       timeout=300, cwd=ROOT, env=_env())
    assert r.returncode == 0, (r.returncode, r.stdout[-1500:], r.stderr[-1500:])
    reports = sorted(line.split("REPORT ", 1)[1] for line in r.stdout.splitlines() if "REPORT " in line)
    assert reports == ["0 [0, 1] MATCH refused", "1 [2, 3] MATCH refused"], r.stdout[-1500:]
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == ["process_0", "process_1"]


@needs_libtpu
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax (a test-only peer) is not installed")
def test_the_hosts_are_jaxs() -> None:
    """JAX's own topology description (``jax.experimental.topologies.get_topology_desc``, in a process
    of its own) puts every device on the same host as xs.topology does, multi-slice included."""
    code = textwrap.dedent("""
        import json, os
        os.environ.update(JAX_PLATFORMS="cpu", TPU_SKIP_MDS_QUERY="1", TPU_WORKER_HOSTNAMES="localhost",
                          ALLOW_MULTIPLE_LIBTPU_LOAD="1")
        from jax.experimental import topologies
        out = {}
        for name, slices in (("v5e:4x4", 1), ("v5e:2x4", 1), ("v5e:2x2", 2)):
            t = topologies.get_topology_desc(name, "tpu", num_slices=slices) if slices > 1 else \\
                topologies.get_topology_desc(name, "tpu")
            out[f"{name}/{slices}"] = sorted([d.id, d.process_index] for d in t.devices)
        print(json.dumps(out))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, cwd=ROOT,
                       env=_env())
    assert r.returncode == 0, r.stderr[-1500:]
    jax_hosts = json.loads(r.stdout.strip().splitlines()[-1])
    for key, want in jax_hosts.items():
        name, slices = key.split("/")
        topo = xs.topology(name, num_slices=int(slices))
        assert sorted([d.id, d.process_index] for d in topo.devices) == want, key


@needs_libtpu
@pytest.mark.parametrize(("change", "words"), [
    (lambda m: [m], "not an xlasdk host part"),
    (lambda m: dict(m, version=2), "version 2 is unsupported"),
    (lambda m: dict(m, process_index="0"), "corrupt"),
    (lambda m: dict(m, process_index=5), "corrupt"),
    (lambda m: dict(m, logical_ids=7), "corrupt"),
    (lambda m: dict(m, logical_ids=[[0, 0]]), "corrupt"),
    (lambda m: dict(m, local_device_ids=["0", "1"]), "list of ints"),
    (lambda m: dict(m, device_ids=[0, 1, 2, 5]), "are not the part's"),
    (lambda m: {k: v for k, v in m.items() if k != "sha256"}, "corrupt"),
])
def test_a_hostile_host_json_is_a_format_error(tmp_path: Path, change: object, words: str) -> None:
    from xlasdk.runtime.host_parts import read_host_part

    exe = xs.compile(_contracting_split_matmul(4), device=xs.topology("v5e:2x2").devices[0],
                     options=xs.CompileOptions(num_partitions=4))
    (d,) = exe.save_per_host(tmp_path)
    meta = json.loads((Path(d) / "host.json").read_text())
    (Path(d) / "host.json").write_text(json.dumps(change(meta)))  # type: ignore[operator]
    with pytest.raises(xs.FormatError, match=words):
        read_host_part(d)


@needs_libtpu
def test_a_part_moved_to_another_process_directory_or_a_dir_without_index(tmp_path: Path) -> None:
    """process_2/host.json edited to say process 3 (it would hand process 3 process 2's devices) is
    refused; ``read_host_part(DIR)`` without an index names the parts and what to give (a new user's
    findings)."""
    from xlasdk.runtime.host_parts import read_host_part

    exe = xs.compile(_contracting_split_matmul(16), device=xs.topology("v5e:4x4").devices[0],
                     options=xs.CompileOptions(num_partitions=16))
    dirs = exe.save_per_host(tmp_path)
    assert [Path(d).name for d in dirs] == ["process_0", "process_1", "process_2", "process_3"]
    assert read_host_part(tmp_path, process_index=2).process_index == 2
    with pytest.raises(xs.FormatError, match=r"holds the parts process_0, process_1, process_2, process_3: give "
                                             r"process_index=K"):
        read_host_part(tmp_path)
    part = Path(dirs[2]) / "host.json"
    part.write_text(json.dumps(dict(json.loads(part.read_text()), process_index=3)))
    with pytest.raises(xs.FormatError, match="holds the part of process 3, but its directory is process 2's"):
        read_host_part(dirs[2])
