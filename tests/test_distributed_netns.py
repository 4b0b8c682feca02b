"""Several hosts for real: one network namespace per host, each with its own address on one bridge.

Needs root (``ip netns``); CI runs as root. Each "host" is a namespace ``h0``, ``h1``, ``h2`` with
an interface ``eth0`` (10.77.<k>.1-3/24) plugged into a bridge in a fourth namespace (the switch).
Processes run with ``ip netns exec``, as the README's multi-host recipe says: the coordinator
address of process 0's host, the same ``XLASDK_*`` variables, ``XLASDK_GLOO_INTERFACE=eth0``.
The namespaces are deleted whatever happens (fixture finalizer).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.test_distributed import WORKER, Job, _env, _start, check_allreduce

HEARTBEAT = 5  # seconds: XLASDK_HEARTBEAT_TIMEOUT of the jobs here


@dataclass
class Network:
    hosts: list[str]  # namespace names, one per host
    addresses: list[str]  # each host's address on the bridge
    switch: str

    def ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)

    def job(self, n: int, port: int, *args: str, **env: str) -> Job:
        """Process k of an n-process job on host k (process 0's host runs the coordinator)."""
        envs = {
            k: _env(
                XLASDK_COORDINATOR=f"{self.addresses[0]}:{port}", XLASDK_NUM_PROCESSES=str(n),
                XLASDK_PROCESS_ID=str(k), XLASDK_GLOO_INTERFACE="eth0", XLASDK_JOIN_TIMEOUT="60",
                XLASDK_HEARTBEAT_TIMEOUT=str(HEARTBEAT), XLASDK_SHUTDOWN_TIMEOUT="10", **env,
            )
            for k in range(n)
        }
        return _start(
            {k: ["ip", "netns", "exec", self.hosts[k], sys.executable, WORKER, *args] for k in range(n)}, envs
        )


def _cannot_use_netns() -> str | None:
    if shutil.which("ip") is None:
        return "the 'ip' command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (ip netns add)"
    return None


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    why = _cannot_use_netns()
    if why is not None:
        pytest.skip(f"several-hosts test: {why}")
    tag = f"xs{os.getpid() % 100000}"
    subnet = 1 + os.getpid() % 250
    net = Network([f"{tag}h{k}" for k in range(3)], [f"10.77.{subnet}.{k + 1}" for k in range(3)], f"{tag}sw")
    made: list[str] = []
    try:
        try:
            net.ip("netns", "add", net.switch)
        except subprocess.CalledProcessError as e:
            pytest.skip(f"several-hosts test: 'ip netns add' is not permitted here ({e.stderr.strip()})")
        made.append(net.switch)
        net.ip("-n", net.switch, "link", "add", "br0", "type", "bridge")
        net.ip("-n", net.switch, "link", "set", "br0", "up")
        for k, (host, address) in enumerate(zip(net.hosts, net.addresses, strict=True)):
            net.ip("netns", "add", host)
            made.append(host)
            net.ip("-n", host, "link", "set", "lo", "up")
            net.ip("-n", host, "link", "add", "eth0", "type", "veth", "peer", "name", f"port{k}", "netns", net.switch)
            net.ip("-n", host, "addr", "add", f"{address}/24", "dev", "eth0")
            net.ip("-n", host, "link", "set", "eth0", "up")
            net.ip("-n", net.switch, "link", "set", f"port{k}", "master", "br0")
            net.ip("-n", net.switch, "link", "set", f"port{k}", "up")
        yield net
    finally:
        for name in reversed(made):  # deleting a namespace deletes its interfaces
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def test_two_hosts_allreduce(network: Network) -> None:
    job = network.job(2, 23456, "allreduce")
    check_allreduce(job, 2, 1)  # the values against numpy, the same devices in both processes


def test_a_host_whose_link_goes_down(network: Network) -> None:
    # Three hosts; after one all-reduce, host 2's link goes down; the next all-reduce must fail in
    # processes 0 and 1 within the stated bound (heartbeat_timeout + 5 s), not hang (gloo alone
    # waits for a silent peer forever), and their shutdown() must be quick.
    folder = tempfile.mkdtemp()
    try:
        job = network.job(3, 23457, "partition", XLASDK_TEST_DIR=folder)
        deadline = time.monotonic() + 120
        while not all(os.path.exists(os.path.join(folder, f"ready{k}")) for k in range(3)):
            assert time.monotonic() < deadline and all(p.poll() is None for p in job.procs.values()), job.describe()
            time.sleep(0.05)
        network.ip("-n", network.hosts[2], "link", "set", "eth0", "down")
        open(os.path.join(folder, "go"), "w").close()
        for k in (0, 1):
            try:
                job.procs[k].wait(timeout=HEARTBEAT + 30)
            except subprocess.TimeoutExpired:
                pass
        os.killpg(job.procs[2].pid, signal.SIGKILL)  # host 2's process is cut off: not the subject here
        job.finish()
        res = job.results()
        for k in (0, 1):
            assert job.codes[k] == 3, job.describe()
            error = str(res[k]["error"])
            assert error.startswith(f"process {k} of 3: executing 'allreduce' across processes failed"), error
            assert "unreachable" in error and "10.77." in error, error
            assert float(res[k]["seconds"]) < HEARTBEAT + 5, res[k]  # type: ignore[arg-type]
            assert float(res[k]["shutdown_seconds"]) < 2, res[k]  # type: ignore[arg-type]
            assert "FATAL" not in job.err[k] and "coordination" not in job.err[k].lower(), job.describe()
        assert 2 not in res or res[2]["error"] is not None, job.describe()  # never a value without host 2
    finally:
        shutil.rmtree(folder, ignore_errors=True)
