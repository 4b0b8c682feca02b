"""Issue 17, finding 7: small files decided how much memory and time xlasdk spent.

Reproduced on the code before this file (2-core machine, 23 GiB, jaxlib 0.10.2):

- a 10 MB HLO text tuple of 10^6 scalars: the worker took 4.5 GiB and 28 s to load it (the parent
  then 1 GiB and 19 s more in the Python pre-check); a 1 MB tuple of 10^5: its compile was stopped
  by a 150 s timeout (4,000 elements: 0.9 s, 16,000: 14 s);
- ``f32[268435456] constant({1, 2, 3})`` (97 bytes): the worker allocated 1.1 GiB before XLA's
  parser counted the values; ``f32[4294967296] constant({1, 2, 3})`` (98 bytes): 16.5 GiB and
  41 s; ``f32[268435456] constant(1)`` (60 bytes, a form XLA's parser accepts): 57 s and 14.5 GiB to
  load, 150 s to compile, 10 GiB in the user's process, and a wrong value: XLA reads
  ``f32[4] constant(1)`` as ``{1, 0, 0, 0}``;
- ``xlasdk run --random-inputs`` on an ``s8[6000000000]`` parameter: ``internal error
  (MemoryError)`` after 10 s (numpy's int64 draw: 44.7 GiB); on an ``f32[3000000000]`` result: killed
  by the out-of-memory killer at 22 GiB after 66 s (the limit was the machine's 23 GiB);
- the worker had no memory budget: a load or compile could take all of the machine's memory.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk._jaxlib import isolated
from xlasdk.errors import CompileError, FormatError, XlaSdkError
from xlasdk.formats import computation_from_hlo_text, hlo_check

REPO = Path(__file__).resolve().parent.parent
_BUDGET_SENTENCE = "xlasdk's worker process ran past its memory budget of {} (XLASDK_WORKER_MEMORY raises it); " \
                   "this says nothing about whether the input is valid"


def _tuple_module(n: int, name: str = "tup") -> str:
    shape = "(" + ", ".join(["f32[]"] * n) + ")"
    return (f"HloModule {name}\n\nENTRY main {{\n  p = f32[] parameter(0)\n"
            f"  ROOT t = {shape} tuple({', '.join(['p'] * n)})\n}}\n")


def _constant_module(body: str) -> str:
    return f"HloModule c\n\nENTRY main {{\n  ROOT c = {body}\n}}\n"


@pytest.fixture
def no_worker_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The size checks run in the user's process before XLA sees the text: asking the worker fails the test."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"the worker was asked: {args[:1]}")

    monkeypatch.setattr(isolated, "request", refuse)


@pytest.fixture
def fresh_worker(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A worker started under the environment the test sets; the default one again afterwards."""
    isolated.shutdown()
    yield monkeypatch
    monkeypatch.undo()
    isolated.shutdown()


# -- early size checks of HLO text ---------------------------------------------------------------------
def test_tuple_past_the_limit_is_refused_before_xla_parses_it(tmp_path: Path, no_worker_request: None) -> None:
    path = tmp_path / "t.hlo"
    path.write_text(_tuple_module(40_000))
    t0 = time.perf_counter()
    with pytest.raises(FormatError) as info:
        xs.load_computation(path)
    assert time.perf_counter() - t0 < 5
    assert str(info.value) == (
        f"{path}: line 5: instruction 't' has a tuple shape of 40,000 elements, more than the limit of 32,768 "
        "(XLASDK_MAX_TUPLE_ELEMENTS raises it; XLA's parse and compile take time and memory that grow with it)"
    )
    assert hlo_check.MAX_TUPLE_ELEMENTS == 32_768


def test_the_million_element_tuple_is_refused_in_linear_time(no_worker_request: None) -> None:
    """A 10 MB tuple (the worker took 4.5 GiB and 28 s on it, the Python pre-check 19 s more) is refused
    by the pre-check in time linear in the text: 4x the elements take about 4x the time, where a
    quadratic check takes 16x. Timed against itself (the fastest of a few runs of each size), so that
    a busy machine (CI's two cores run two test processes) does not fail it."""
    def refusal(n: int) -> float:
        text = _tuple_module(n)
        t0 = time.perf_counter()
        with pytest.raises(FormatError, match=rf"^big: line 5: instruction 't' has a tuple shape of {n:,} elements"):
            computation_from_hlo_text(text, "big")
        return time.perf_counter() - t0

    quarter = min(refusal(250_000) for _ in range(3))
    whole = min(refusal(1_000_000) for _ in range(2))
    assert whole < 8 * quarter + 1.0, (whole, quarter)


def test_tuple_limit_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLASDK_MAX_TUPLE_ELEMENTS", "8")
    with pytest.raises(FormatError, match=r"^x: line 5: instruction 't' has a tuple shape of 9 elements, more than "
                                          r"the limit of 8 \(XLASDK_MAX_TUPLE_ELEMENTS"):
        computation_from_hlo_text(_tuple_module(9), "x")
    comp = computation_from_hlo_text(_tuple_module(8), "x")
    assert len(comp.program_shape().result_shape().tuple_shapes()) == 8
    # an operand list counts too (the text's shape is wrong, but the claim is refused first)
    ops_only = _tuple_module(9).replace("ROOT t = (" + ", ".join(["f32[]"] * 9) + ")", "ROOT t = (f32[])")
    with pytest.raises(FormatError, match=r"^x: line 5: instruction 't' has 9 operands, more than the limit of 8 "):
        hlo_check.check_hlo_claims(ops_only, "x")
    monkeypatch.setenv("XLASDK_MAX_TUPLE_ELEMENTS", "0")  # no limit
    hlo_check.check_hlo_claims(_tuple_module(40_000), "x")
    monkeypatch.setenv("XLASDK_MAX_TUPLE_ELEMENTS", "lots")
    with pytest.raises(XlaSdkError, match=r"XLASDK_MAX_TUPLE_ELEMENTS must be a whole number >= 0 \(0: no limit\), "
                                          r"got 'lots'"):
        hlo_check.check_hlo_claims("HloModule m", "x")


def test_constant_claims_are_refused_before_xla_allocates_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_worker_request: None) -> None:
    path = tmp_path / "c.hlo"
    path.write_text(_constant_module("f32[268435456] constant({1, 2, 3})"))  # 97 bytes that claim 1 GiB
    with pytest.raises(FormatError) as info:
        xs.load_computation(path)
    assert str(info.value) == (
        f"{path}: line 4: constant 'c' claims f32[268435456] (268,435,456 elements, 1.0 GiB), more than the limit "
        "of 128.0 MiB for one constant (XLASDK_MAX_CONSTANT_BYTES raises it)"
    )
    assert hlo_check.MAX_CONSTANT_BYTES == 128 << 20
    monkeypatch.setenv("XLASDK_MAX_CONSTANT_BYTES", "0")  # no byte limit: the count is still checked
    with pytest.raises(FormatError) as info:
        xs.load_computation(path)
    assert str(info.value) == (
        f"{path}: line 4: constant 'c' claims f32[268435456] (268,435,456 elements), but the 13 characters of text "
        "after it can spell at most 7 values"
    )
    monkeypatch.setenv("XLASDK_MAX_CONSTANT_BYTES", "1000")
    with pytest.raises(FormatError, match=r"line 4: constant 'c' claims s32\[300\]\{0\} \(300 elements, 1,200 bytes\), "
                                          r"more than the limit of 1,000 bytes"):
        hlo_check.check_hlo_claims(_constant_module("s32[300]{0} constant({" + "7," * 299 + "7})"), "x")
    with pytest.raises(FormatError, match=r"constant 'c' claims \(f32\[200\], s32\[200\]\) \(400 elements, 1,600 "):
        hlo_check.check_hlo_claims(_constant_module("(f32[200], s32[200]) constant(({1}, {2}))"), "x")


def test_valid_constants_pass_the_claims_check() -> None:
    for body in ("f32[4] constant({1, 2, 3, 4})", "f32[2,2]{1,0} constant({ {1, 2}, {3, 4} })",
                 "c64[2] constant({(1, 2), (3, 4)})", "f32[0] constant({})", "pred[3] constant({true,false,true})",
                 "f32[] constant(1)", "f32[1] constant(1)", "(f32[2], s32[]) constant(({1, 2}, 3))"):
        hlo_check.check_hlo_claims(_constant_module(body), "x")
    comp = computation_from_hlo_text(_constant_module("f32[4] constant({1, 2, 3, 4})"), "listed")
    np.testing.assert_array_equal(np.asarray(xs.compile(comp)()), np.arange(1, 5, dtype=np.float32))


def test_an_array_constant_with_one_number_is_refused_not_read_as_zeros(no_worker_request: None) -> None:
    """XLA's parser took `f32[4] constant(1)` as {1, 0, 0, 0} (a wrong answer), and `f32[268435456] constant(1)`
    cost 14.5 GiB and 3.5 minutes."""
    for dims, n in (("4", 4), ("268435456", 268_435_456)):
        with pytest.raises(FormatError) as info:
            computation_from_hlo_text(_constant_module(f"f32[{dims}] constant(1)"), "fill")
        assert str(info.value) == (
            f"fill: line 4: constant 'c' is f32[{dims}] ({n:,} elements) but its value is one number; XLA's parser "
            f"would set the first element to it and the other {n - 1:,} to zero: write every value in braces, or "
            "broadcast a scalar constant"
        )


def test_every_dump_of_the_test_data_passes_the_claims_check() -> None:
    seen = 0
    for path in sorted((REPO / "tests" / "data").rglob("*")):
        if path.suffix in (".txt", ".hlo") and path.is_file():
            text = path.read_text(errors="replace")
            if text.lstrip().startswith("HloModule"):
                hlo_check.check_hlo_claims(text, str(path))
                seen += 1
    assert seen >= 10


# -- the worker's memory budget -----------------------------------------------------------------------
def test_worker_memory_budget_default_and_override(fresh_worker: pytest.MonkeyPatch) -> None:
    fresh_worker.delenv("XLASDK_WORKER_MEMORY", raising=False)
    total = int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    try:
        cg = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        total = min(total, int(cg)) if cg.isdigit() else total
    except OSError:
        pass
    default = max(4 << 30, total // 2)
    assert abs(isolated.memory_budget() - default) <= 1  # type: ignore[operator]
    before = resource.getrlimit(resource.RLIMIT_DATA)
    assert isolated.request("resource:getrlimit", resource.RLIMIT_DATA)[0] == isolated.memory_budget()
    assert resource.getrlimit(resource.RLIMIT_DATA) == before  # set in the worker only
    for value, want in (("8G", 8 << 30), ("1.5GiB", int(1.5 * (1 << 30))), ("512m", 512 << 20), ("4096", 4096),
                        ("0", None), ("none", None)):
        fresh_worker.setenv("XLASDK_WORKER_MEMORY", value)
        assert isolated.memory_budget() == want, value
    fresh_worker.setenv("XLASDK_WORKER_MEMORY", "lots")
    with pytest.raises(XlaSdkError, match=r"XLASDK_WORKER_MEMORY must be a size such as 8G .* got 'lots'"):
        isolated.memory_budget()
    isolated.shutdown()
    with pytest.raises(XlaSdkError, match="XLASDK_WORKER_MEMORY must be a size"):
        computation_from_hlo_text(_constant_module("f32[] constant(1)"), "x")


def test_a_load_past_the_budget_is_a_budget_error_not_a_corrupt_file(
        tmp_path: Path, fresh_worker: pytest.MonkeyPatch) -> None:
    fresh_worker.setenv("XLASDK_WORKER_MEMORY", "600M")
    from xlasdk.formats import untrusted

    for module in (untrusted, hlo_check):  # without the early check, XLA's parser allocates the 1 GiB claimed
        fresh_worker.setattr(module, "check_hlo_claims", lambda *a: None)
    path = tmp_path / "big.hlo"
    path.write_text(_constant_module("f32[268435456] constant({1, 2, 3})"))
    with pytest.raises(FormatError) as info:
        xs.load_computation(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: loading the module was stopped: " + _BUDGET_SENTENCE.format("600 MiB")), msg
    assert "syntax error" not in msg and "aborted" not in msg


def test_a_compile_past_the_budget_is_a_budget_error(fresh_worker: pytest.MonkeyPatch) -> None:
    comp = computation_from_hlo_text(_tuple_module(2_000), "tup2000")
    fresh_worker.setenv("XLASDK_WORKER_MEMORY", "150M")  # the next request starts a worker with this budget
    with pytest.raises(CompileError) as info:
        xs.compile(comp)
    msg = str(info.value)
    assert _BUDGET_SENTENCE.format("150 MiB") in msg, msg
    assert "aborted" not in msg
    fresh_worker.delenv("XLASDK_WORKER_MEMORY")
    out = xs.compile(comp)(np.float32(2))  # the default budget compiles it
    assert isinstance(out, tuple) and len(out) == 2_000 and np.asarray(out[0]) == 2


def _die_of_bad_alloc(log: str) -> None:  # pragma: no cover - runs in the worker process
    with open(log, "a") as f:
        f.write("x")
    sys.stderr.write("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n")
    sys.stderr.flush()
    os.abort()


def _die_as_glibc_does(log: str) -> None:  # pragma: no cover - runs in the worker process
    """What glibc prints and does when a new thread's memory is past RLIMIT_AS (seen once in a full run
    of test_a_compile_past_the_budget_is_a_budget_error: exit 127, "ended before it answered")."""
    with open(log, "a") as f:
        f.write("x")
    sys.stderr.write("cannot allocate memory for thread-local data: ABORT\n")
    sys.stderr.flush()
    os._exit(127)


def _allocate(n: int) -> int:  # pragma: no cover - runs in the worker process
    return len(bytearray(n))


def test_worker_deaths_and_failures_of_memory_say_so_and_are_not_retried(
        tmp_path: Path, fresh_worker: pytest.MonkeyPatch) -> None:
    fresh_worker.setenv("XLASDK_WORKER_MEMORY", "2G")
    fresh_worker.chdir(REPO)  # the worker imports this module by name
    log = tmp_path / "calls"
    with pytest.raises(isolated.WorkerDied) as info:
        isolated.request("tests.test_bounded_work:_die_of_bad_alloc", str(log))
    assert info.value.out_of_memory and info.value.killed and not info.value.timed_out
    assert info.value.reason == _BUDGET_SENTENCE.format("2.0 GiB")
    assert log.read_text() == "x"  # once: the same budget would run out again
    with pytest.raises(isolated.WorkerDied) as info:  # glibc's words for a thread past the budget
        isolated.request("tests.test_bounded_work:_die_as_glibc_does", str(log))
    assert info.value.out_of_memory and info.value.reason == _BUDGET_SENTENCE.format("2.0 GiB")
    assert log.read_text() == "xx"
    with pytest.raises(isolated.Failed) as failed:
        isolated.request("tests.test_bounded_work:_allocate", 1 << 40)
    assert failed.value.stage == "memory" and failed.value.message == _BUDGET_SENTENCE.format("2.0 GiB")
    assert isolated.request("tests.test_bounded_work:_allocate", 1000) == 1000  # the worker goes on


# -- xlasdk run: refused before allocation, never `internal error (MemoryError)` --------------------------
def _cli_under_rlimit_as(tmp_path: Path, text: str, limit: int, *extra: str,
                         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "m.hlo"
    path.write_text(text)

    def limit_as() -> None:  # pragma: no cover - in the child
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))

    return subprocess.run(
        [sys.executable, "-m", "xlasdk.cli", "run", str(path), "--random-inputs", *extra],
        capture_output=True, text=True, timeout=120, preexec_fn=limit_as, cwd=REPO,
        env={**os.environ, "XLASDK_WORKER_MEMORY": "0", **(env or {})},
    )


_BIG_INPUT = """HloModule big_input

ENTRY main {
  p = s8[1000000000] parameter(0)
  ROOT r = s8[1] slice(p), slice={[0:1]}
}
"""
_BIG_OUTPUT = """HloModule big_output

ENTRY main {
  c = f32[] constant(1)
  ROOT r = f32[1000000000] broadcast(c), dimensions={}
}
"""


@pytest.mark.parametrize("which", ["input", "output"])
def test_run_refuses_what_this_process_cannot_allocate_with_exit_2(tmp_path: Path, which: str) -> None:
    """1 GB of input (numpy's int64 draw: 8 GB) or 4 GB of output (its host copy and summary: 21 GB more) under
    a 6 GiB address space: before, `internal error (MemoryError)` or the out-of-memory killer."""
    r = _cli_under_rlimit_as(tmp_path, _BIG_INPUT if which == "input" else _BIG_OUTPUT, 6 << 30)
    assert r.returncode == 2, r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    if which == "input":
        want = ("running the program takes about 10,000,000,002 bytes (its inputs and outputs: 1,000,000,001; ",
                "the largest: parameter 0 (p), s8[1000000000], about 10,000,000,000 bytes); XLASDK_MAX_RUN_BYTES")
    else:
        want = ("running the program takes about 25,000,000,000 bytes (its inputs and outputs: 4,000,000,000; ",
                "the largest: output 0, f32[1000000000], about 25,000,000,000 bytes); XLASDK_MAX_RUN_BYTES")
    for w in want:
        assert w in r.stderr, r.stderr
    assert "left under this process's RLIMIT_AS (ulimit)" in r.stderr or "free on this machine" in r.stderr


def test_run_past_the_estimate_still_exits_2(tmp_path: Path) -> None:
    """XLASDK_MAX_RUN_BYTES lifts the estimate; a MemoryError is then exit 2 naming the size, not an internal error."""
    r = _cli_under_rlimit_as(tmp_path, _BIG_INPUT, 6 << 30, env={"XLASDK_MAX_RUN_BYTES": str(10**12)})
    assert r.returncode == 2, r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert "the run needs more memory than this process can allocate (Unable to allocate 7.45 GiB" in r.stderr, r.stderr
    assert "XLASDK_MAX_RUN_BYTES bounds what xlasdk run accepts" in r.stderr
