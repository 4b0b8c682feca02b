"""Files xlasdk did not write: loading and compiling them fails closed (xlasdk errors, never a death).

Every XLA/MLIR step on file content runs first in xlasdk's worker process
(``xlasdk._jaxlib.isolated``); these tests feed it modules that abort XLA and check that the
user's process gets an xlasdk error carrying XLA's own message, and that the worker comes back.
Cases C-15 (stack-frame tables) and C-16 (element-type-changing bitcast) from shared/cases.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import xlasdk as xs
import xlasdk.formats.hlo_check as hlo_check
from xlasdk._jaxlib import isolated

_TABLES = """
FileNames
1 "model.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
"""


def _c15(n: int, tables: bool = True) -> str:
    return (
        f"HloModule bad, entry_computation_layout={{(f32[4,8]{{1,0}})->f32[{n}]{{0}}}}\n"
        + (_TABLES if tables else "")
        + "\nENTRY main {\n"
        "  a = f32[4,8]{1,0} parameter(0)\n"
        f'  ROOT r = f32[{n}]{{0}} reshape(a), metadata={{op_name="jit(f)/reshape" stack_frame_id=1}}\n'
        "}\n"
    )


def test_c15_stack_frame_tables_bad_reshape_is_rejected_with_its_line() -> None:
    plain = _c15(31, tables=False)
    with pytest.raises(xs.FormatError, match=r"line 5: reshape .r. cannot turn f32\[4,8\] \(32 elements\)"):
        xs.XlaComputation.from_hlo_text(plain)
    with pytest.raises(xs.FormatError, match=r"line 17: reshape .r. cannot turn f32\[4,8\] \(32 elements\)"):
        xs.XlaComputation.from_hlo_text(_c15(31))


def test_c15_stack_frame_tables_valid_module_loads_and_runs(tmp_path: object) -> None:
    comp = xs.XlaComputation.from_hlo_text(_c15(32))
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(xs.compile(comp)(x).to_numpy(), x.reshape(32))
    # the metadata's stack_frame_id and the tables survive: XLA prints them back
    text = comp.as_hlo_text()
    assert "StackFrames" in text and "stack_frame_id=1" in text


_C16 = """HloModule sortkey

ENTRY main {
  %x = f32[] parameter(0)
  ROOT %b = s32[] bitcast(f32[] %x)
}
"""


@pytest.mark.parametrize(("x", "want"), [(-0.0, -2147483648), (1.0, 1065353216), (-1.5, -1077936128)])
def test_c16_bitcast_that_changes_element_type_is_bitcast_convert(x: float, want: int) -> None:
    comp = xs.XlaComputation.from_hlo_text(_C16)
    got = xs.compile(comp)(np.float32(x)).to_numpy()
    assert got.dtype == np.int32 and int(got) == want == int(np.float32(x).view(np.int32))


def test_bitcast_that_changes_element_type_and_shape() -> None:
    text = """HloModule m

ENTRY main {
  p = f32[2,3]{1,0} parameter(0)
  ROOT b = u32[6]{0} bitcast(p)
}
"""
    x = np.array([[1.0, -0.0, 2.5], [np.inf, -3.0, 1e-30]], np.float32)
    got = xs.compile(xs.XlaComputation.from_hlo_text(text))(x).to_numpy()
    np.testing.assert_array_equal(got, x.reshape(6).view(np.uint32))


def test_bitcast_that_changes_element_type_under_a_transposed_layout() -> None:
    # physical order of p is [3,2] (layout {0,1}): the result is the column-major bytes
    text = """HloModule m

ENTRY main {
  p = f32[2,3]{0,1} parameter(0)
  ROOT b = s32[6]{0} bitcast(p)
}
"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    got = xs.compile(xs.XlaComputation.from_hlo_text(text))(x).to_numpy()
    np.testing.assert_array_equal(got, x.T.reshape(6).view(np.int32))


def test_module_xla_aborts_on_is_a_format_error_with_xlas_check_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # The Python pre-check does not understand the text (simulated): XLA's parser aborts, in the worker.
    monkeypatch.setattr(hlo_check, "_check_module", lambda mod: [])
    with pytest.raises(xs.FormatError) as info:
        xs.XlaComputation.from_hlo_text(_c15(31))
    msg = str(info.value)
    # XLA of jaxlib 0.10.2 aborts on it (contained in the worker); 0.12's parser rejects it cleanly
    aborted = "SIGABRT" in msg and "Check failed" in msg
    rejected = "HLO syntax error: line 18" in msg and "same number of elements" in msg
    assert "from_hlo_text" in msg and "f32[31]" in msg and (aborted or rejected), msg
    # the worker is replaced: the next load works
    comp = xs.XlaComputation.from_hlo_text(_c15(32))
    assert comp.program_shape().result_shape().dimensions() == (32,)


def test_file_xla_aborts_on_names_the_file(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    import pathlib

    assert isinstance(tmp_path, pathlib.Path)
    path = tmp_path / "module_0000.jit_f.cpu_after_optimizations.txt"
    path.write_text(_c15(31))
    with pytest.raises(xs.FormatError, match=r"cpu_after_optimizations\.txt: line 17: reshape 'r'"):
        xs.load_computation(path)
    monkeypatch.setattr(hlo_check, "_check_module", lambda mod: [])  # the pre-check finds nothing
    # jaxlib 0.10.2: XLA aborts (contained); 0.12: XLA's parser rejects it with its own line
    with pytest.raises(
        xs.FormatError,
        match=r"cpu_after_optimizations\.txt: (XLA aborted .*Check failed|HLO syntax error: line 18, .*same number)",
    ):
        xs.load_computation(path)


def test_loaded_module_whose_compile_kills_xla_is_a_compile_error() -> None:
    # C-03's constant division by zero: XLA:CPU's constant folding dies with SIGFPE. Loaded from
    # text, the program is compiled in the worker first.
    text = """HloModule m

ENTRY main {
  a = s32[] constant(7)
  b = s32[] constant(0)
  ROOT d = s32[] divide(a, b)
}
"""
    comp = xs.XlaComputation.from_hlo_text(text)
    if xs.jaxlib_version_info()[1] < 495:  # XLA of jaxlib 0.11+ no longer folds it into SIGFPE
        with pytest.raises(xs.CompileError, match=r"XLA aborted on this program \(it died with SIGFPE"):
            xs.compile(comp)
    else:
        assert int(xs.compile(comp)().to_numpy()) == -1  # XLA's integer division by zero: -1
    # and the process, and the worker, carry on
    ok = xs.XlaComputation.from_hlo_text(text.replace("constant(0)", "constant(2)"))
    assert int(xs.compile(ok)().to_numpy()) == 3


def test_inconsistent_hlo_names_the_line_and_the_instruction() -> None:
    text = """HloModule m

ENTRY main {
  p = f32[2] parameter(0)
  q = f32[3] parameter(1)
  ROOT s = f32[2] add(p, q)
}
"""
    with pytest.raises(xs.FormatError, match=r"from_hlo_text: .*line 6"):
        xs.XlaComputation.from_hlo_text(text)


def test_deeply_nested_stablehlo_is_a_format_error() -> None:
    # MLIR's parser recurses per nesting level: 100,000 nested tuple types overflow the native stack.
    depth = 100_000
    ty = "tuple<" * depth + "tensor<f32>" + ">" * depth
    text = f"func.func @main(%a: {ty}) -> tensor<f32> {{\n  %c = stablehlo.constant dense<1.0> : tensor<f32>\n" \
           "  return %c : tensor<f32>\n}\n"
    with pytest.raises(xs.FormatError, match=r"from_stablehlo"):
        xs.XlaComputation.from_stablehlo(text)


def test_deeply_nested_hlo_tuple_shape_is_a_format_error() -> None:
    depth = 20_000
    shape = "(" * depth + "f32[]" + ")" * depth
    text = f"HloModule m\n\nENTRY main {{\n  ROOT p = {shape} parameter(0)\n}}\n"
    with pytest.raises(xs.FormatError, match=r"from_hlo_text"):
        xs.XlaComputation.from_hlo_text(text)


def test_recursive_call_in_stablehlo_is_an_xlasdk_error() -> None:
    text = """func.func @main(%a: tensor<f32>) -> tensor<f32> {
  %r = func.call @main(%a) : (tensor<f32>) -> tensor<f32>
  return %r : tensor<f32>
}
"""
    with pytest.raises(xs.XlaSdkError):
        xs.compile(xs.XlaComputation.from_stablehlo(text))


def test_corrupt_bytecode_is_decoded_in_the_worker() -> None:
    b = xs.XlaBuilder("f")
    from xlasdk import ops

    ops.Add(ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)), "x"), ops.Constant(b, np.float32(1)))
    data = b.build().serialize_portable_artifact()
    for cut in (len(data) // 3, len(data) // 2, len(data) - 3):
        with pytest.raises(xs.FormatError, match="from_stablehlo"):
            xs.XlaComputation.from_stablehlo(data[:cut])


def test_worker_reports_death_and_restarts() -> None:
    import os
    import signal

    isolated.request("os:getpid")  # start (or reuse) the worker
    pid = isolated.worker_pid()
    assert pid is not None and pid != os.getpid()
    # SIGABRT, as XLA's own aborts (a SIGKILL comes from outside and is retried once: see
    # test_worker_lifetime.py)
    with pytest.raises(isolated.WorkerDied, match="SIGABRT"):
        isolated.request("os:kill", pid, signal.SIGABRT)
    assert isolated.request("os:getpid") != pid


def test_worker_timeout_kills_the_request() -> None:
    with pytest.raises(isolated.WorkerDied, match="did not finish within 0.5 s") as info:
        isolated.request("time:sleep", 30, timeout=0.5)
    assert info.value.timed_out
    assert isolated.request("math:sqrt", 16.0) == 4.0


_ASYNC_PAIRS = {
    "copy-start/copy-done": """HloModule m, is_scheduled=true

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %cs = (f32[4]{0}, f32[4]{0}, u32[]) copy-start(%x)
  %cd = f32[4]{0} copy-done(%cs), metadata={op_name="offload"}
  ROOT %n = f32[4]{0} negate(%cd)
}
""",
    "async-start/async-done": """HloModule m, is_scheduled=true

%wrapped (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %as = ((f32[4]{0}), f32[4]{0}, s32[]) async-start(%x), calls=%wrapped
  ROOT %ad = f32[4]{0} async-done(%as)
}
""",
    "all-gather-start/done": """HloModule m, is_scheduled=true

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %s = f32[4]{0} all-gather-start(%x), replica_groups={}, dimensions={0}
  %d = f32[4]{0} all-gather-done(%s)
  ROOT %n = f32[4]{0} negate(%d)
}
""",
}


@pytest.mark.parametrize("pair", sorted(_ASYNC_PAIRS))
def test_optimized_async_pairs_run(pair: str) -> None:
    # GPU dumps schedule copies and wrapped computations asynchronously; XLA:CPU runs neither
    # copy-start nor async-start: they become copy and call.
    x = np.array([1.5, -2.0, 0.0, 7.0], np.float32)
    got = xs.compile(xs.XlaComputation.from_hlo_text(_ASYNC_PAIRS[pair]))(x).to_numpy()
    np.testing.assert_array_equal(got, -x)


def test_optimized_topk_custom_call_and_frontend_attributes_run() -> None:
    text = """HloModule m, is_scheduled=true, entry_computation_layout={(f32[8]{0})->(f32[3]{0}, s32[3]{0})}

%gt.clone (p.0: f32[], p.1: f32[], p.2: s32[], p.3: s32[]) -> pred[] {
  %p.0 = f32[] parameter(0)
  %p.1 = f32[] parameter(1)
  %p.2 = s32[] parameter(2)
  %p.3 = s32[] parameter(3)
  ROOT %gt = pred[] compare(%p.0, %p.1), direction=GT, type=TOTALORDER
}

ENTRY %main (x: f32[8]) -> (f32[3], s32[3]) {
  %x = f32[8]{0} parameter(0), frontend_attributes={_xla_note="kept"}
  %tk = (f32[3]{0}, s32[3]{0}) custom-call(%x), custom_call_target="TopK", called_computations={%gt.clone}
  %a = f32[3]{0} get-tuple-element(%tk), index=0
  %b = s32[3]{0} get-tuple-element(%tk), index=1
  ROOT %t = (f32[3]{0}, s32[3]{0}) tuple(%a, %b)
}
"""
    x = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.float32)
    values, indices = xs.compile(xs.XlaComputation.from_hlo_text(text))(x)
    order = np.argsort(-x, kind="stable")[:3]
    np.testing.assert_array_equal(values.to_numpy(), x[order])
    np.testing.assert_array_equal(indices.to_numpy(), order.astype(np.int32))


def test_shardy_lowering_from_jax_loads_and_runs_partitioned() -> None:
    # jax.jit(f, in_shardings=NamedSharding(...)).lower(a, b).as_text() with JAX 0.10.2: Shardy's
    # sdy.mesh and sdy.sharding attributes; f = tanh(a @ b), a split 4 ways on rows, b replicated;
    # lowered_sdy_io.npz holds a, b and JAX's result on 4 CPU devices.
    import pathlib

    here = pathlib.Path(__file__).parent / "data" / "spmd"
    io = np.load(here / "lowered_sdy_io.npz")
    comp = xs.load_computation(here / "lowered_sdy.mlir")
    devs = xs.client("cpu", num_devices=4).devices()
    exe = xs.compile(comp, devs[0], options=xs.CompileOptions(num_partitions=4))
    out = exe.execute_sharded([io["in0"], io["in1"]])
    want = np.tanh(io["in0"].astype(np.float64) @ io["in1"].astype(np.float64))
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out.to_numpy(), io["out0"])


def _in_child(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter: a regression that kills the process fails the test only."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


_RECURSIVE = """func.func @main(%a: tensor<f32>) -> tensor<f32> {
  %r = func.call @main(%a) : (tensor<f32>) -> tensor<f32>
  return %r : tensor<f32>
}
"""


@pytest.mark.parametrize("method", ["as_hlo_text", "as_serialized_hlo_module_proto", "as_hlo_dot_graph"])
def test_hlo_of_a_loaded_module_the_converter_dies_on_is_a_compile_error(method: str) -> None:
    # XLA's StableHLO -> HLO converter overflows the native stack on a recursive call: for a
    # loaded module it runs in the worker first.
    r = _in_child(
        "import xlasdk as xs\n"
        f"c = xs.XlaComputation.from_stablehlo({_RECURSIVE!r})\n"
        "try:\n"
        f"    c.{method}()\n"
        "except xs.CompileError as e:\n"
        "    print('ERR', e)\n"
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ERR converting 'main' to HLO failed: XLA aborted while converting" in r.stdout


def test_deeply_nested_tuple_layout_is_a_format_error_not_a_recursion_error() -> None:
    depth = 10_000
    shape = "(" * depth + "f32[]" + ")" * depth
    text = (f"HloModule m, entry_computation_layout={{({shape})->f32[]}}\n\n"
            "ENTRY main {\n  ROOT p = f32[] parameter(0)\n}\n")
    with pytest.raises(xs.FormatError, match="from_hlo_text"):
        xs.XlaComputation.from_hlo_text(text)


def test_a_load_that_spins_is_stopped_with_a_format_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # A one-byte edit of a real jax.export bytecode module (found by the hostile-file campaign)
    # makes MLIR's bytecode reader spin for minutes: the worker is stopped at the load limit.
    import pathlib
    import time

    data = (pathlib.Path(__file__).parent / "data" / "dumps" / "int_indexing" / "exported.mlirbc").read_bytes()
    data = data[:118] + bytes([0x03]) + data[119:]
    monkeypatch.setenv("XLASDK_LOAD_TIMEOUT", "3")
    t0 = time.monotonic()
    with pytest.raises(xs.FormatError, match=r"from_stablehlo: reading the module did not finish within 3 s"):
        xs.XlaComputation.from_stablehlo(data)
    assert time.monotonic() - t0 < 60
    monkeypatch.delenv("XLASDK_LOAD_TIMEOUT")
    assert xs.XlaComputation.from_hlo_text(_c15(32)).program_shape().result_shape().dimensions() == (32,)


def test_hlo_of_a_loaded_module_xla_cannot_print_is_a_compile_error() -> None:
    # A nested tuple parameter (found by the hostile-file campaign): XLA converts it, then has no
    # program shape to print; a raw JaxRuntimeError leaked from as_hlo_text.
    depth = 100
    ty = "tuple<" * depth + "tensor<f32>" + ">" * depth
    text = (f"func.func @main(%a: {ty}) -> tensor<f32> {{\n  %c = stablehlo.constant dense<1.0> : tensor<f32>\n"
            "  return %c : tensor<f32>\n}\n")
    comp = xs.XlaComputation.from_stablehlo(text)
    for method in (comp.as_hlo_text, comp.as_serialized_hlo_module_proto, comp.as_hlo_dot_graph):
        with pytest.raises(xs.CompileError, match="No program shape found"):
            method()
