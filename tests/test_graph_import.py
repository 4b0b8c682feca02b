"""Walking and editing a computation's instruction graph (``comp.instructions()``, ``with_outputs``,
``extract``) on real JAX programs' files (tests/data/dumps*, made by tools/make_dump_corpus.py).

Oracles: the original file compiled and run by XLA (an edited program that keeps the outputs must
give the same bits), the recorded inputs and JAX's recorded outputs (an exposed parameter equals the
input; an exposed pre-sort vector sorted with numpy equals JAX's sorted output: within 4 ulps off the
host that recorded it, and bit for bit the file's own output run on this host), and numpy's
convolution and matmul of the exposed operands of a real program's op.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import assert_same_bits, assert_same_or_within_ulps
from tests.test_real_dumps import LOADABLE, PROGRAMS, assert_matches_jax, recorded
from xlasdk import ops

DATA = Path(__file__).resolve().parent / "data"
# compiling the same module again (another file of the same program, compare after compile) reads it
# back from a compile cache of this run (tests/conftest.py): these tests are about values, not compiling
pytestmark = pytest.mark.usefixtures("shared_compile_cache")


def _run(comp: xs.XlaComputation, args: list[Any]) -> list[np.ndarray[Any, Any]]:
    out = xs.compile(comp)(*args)
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


def _same_bits(a: list[np.ndarray[Any, Any]], b: list[np.ndarray[Any, Any]]) -> bool:
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize("fname", LOADABLE)
def test_rebuilt_from_the_graph_gives_the_same_bits(program: str, fname: str) -> None:
    """Every real file: the graph re-emitted with the original outputs computes the same bits as the file."""
    comp = xs.load_computation(DATA / program / fname)
    ins, _ = recorded(program)
    graph = comp.instruction_graph()
    rebuilt = comp.with_outputs(list(graph.outputs))
    assert rebuilt.program_shape().parameter_shapes() == comp.program_shape().parameter_shapes()
    original = _run(comp, ins)
    assert _same_bits(_run(rebuilt, ins), original)
    # and it loads back from every format it saves to, with the same values
    if fname == "lowered.mlir":
        text = rebuilt.as_hlo_text()
        assert _same_bits(_run(xs.XlaComputation.from_hlo_text(text), ins), original)


def test_instructions_of_a_loaded_dump() -> None:
    comp = xs.load_computation(DATA / "dumps/gru_scan/module.before_optimizations.txt")
    instrs = comp.instructions()
    names = [i.name for i in instrs]
    assert len(set(names)) == len(names)
    params = [i for i in instrs if i.opcode == "parameter"]
    assert [p.name for p in params] == list(comp.program_shape().parameter_names())
    assert [p.shape for p in params] == list(comp.program_shape().parameter_shapes())
    # topological order: every operand comes before its user
    for i in instrs:
        assert all(o.index < i.index for o in i.operands), i
        assert i in [u for o in i.operands for u in o.users] or not i.operands
    whiles = [i for i in instrs if i.opcode == "stablehlo.while"]
    assert whiles and whiles[0].shape.is_tuple() and whiles[0].op.regions
    assert whiles[0].metadata.op_name == "jit(gru_forward)/while"
    assert whiles[0].metadata.source_file.endswith("make_dump_corpus.py") and whiles[0].metadata.source_line > 0
    calls = [i for i in instrs if i.opcode == "func.call"]
    assert calls and all(c.is_opaque for c in calls)
    assert calls[0].attributes["callee"].startswith("@")
    bcast = next(i for i in instrs if i.opcode == "stablehlo.broadcast_in_dim")
    assert not bcast.is_opaque and bcast.attributes["broadcast_dimensions"] == ()
    const = next(i for i in instrs if i.opcode == "stablehlo.constant")
    assert isinstance(const.attributes["value"], np.ndarray)
    assert comp.instruction(bcast.name) is not None and comp.instruction(bcast.name).op is bcast.op
    assert comp.instruction(3).name == instrs[3].name


def test_exposed_intermediate_equals_what_jax_computed() -> None:
    """gru_scan sorts a reshaped (6,2,4) scan output: the exposed pre-sort vector, sorted by numpy, is the
    file's own sorted output run on this host, bit for bit, and JAX's recorded one (bit for bit on the
    host that recorded it, within 4 ulps on others: the scan's tanh and exp are compiled for the host's
    CPU); the exposed parameter is the recorded input."""
    program = "dumps/gru_scan"
    ins, outs = recorded(program)
    for fname in ("module.before_optimizations.txt", "lowered.mlir", "exported.mlirbc"):
        comp = xs.load_computation(DATA / program / fname)
        sorted_here = _run(comp, ins)[2]
        instrs = comp.instructions()
        # jnp.sort is a call of a `sort` function (lowered.mlir has no op names: found by its shape)
        call = next(i for i in instrs if i.opcode == "func.call" and i.shape.dimensions() == (48,))
        if fname.endswith(".txt"):
            assert call.metadata.op_name == "jit(gru_forward)/jit(sort)"
        (presort,) = call.operands
        assert presort.opcode == "stablehlo.reshape" and presort.shape.dimensions() == (48,)
        xs_param = comp.instruction(9)  # the 10th argument: xs
        assert xs_param.opcode == "parameter" and xs_param.shape.dimensions() == (6, 2, 3)
        got = _run(comp.with_outputs([presort, xs_param]), ins)
        assert_same_bits(np.sort(got[0]), sorted_here, f"{fname}: the exposed vector sorted")
        assert_same_or_within_ulps(np.sort(got[0]), outs[2], what=f"{fname}: JAX's sorted output")
        assert not np.array_equal(got[0], sorted_here)  # really the unsorted intermediate
        np.testing.assert_array_equal(got[1], ins[9])


def _conv_same_nhwc_hwio(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    kh, kw = w.shape[:2]
    xp = np.pad(x.astype(np.float64), ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(1, 2))  # n, h, w, c, kh, kw
    return np.einsum("nhwcij,ijco->nhwo", win, w.astype(np.float64))


@pytest.mark.parametrize("corpus", ["dumps", "dumps_jax012"])
@pytest.mark.parametrize("fname", ["module.before_optimizations.txt", "module.before_optimizations.hlo.pb",
                                   "lowered.mlir", "exported.mlirbc"])
def test_exposed_convolution_of_a_training_step(corpus: str, fname: str) -> None:
    """The first convolution of convnet_train, exposed with its operands, equals numpy's SAME convolution
    of them; its input operand is the recorded image batch."""
    program = f"{corpus}/convnet_train"
    ins, _ = recorded(program)
    comp = xs.load_computation(DATA / program / fname)
    conv = next(i for i in comp.instructions() if i.opcode == "stablehlo.convolution")
    dn = conv.attributes["dimension_numbers"]  # NHWC input, HWIO kernel, read through the bindings
    assert (dn["input_batch_dimension"], dn["input_feature_dimension"]) == (0, 3)
    assert dn["input_spatial_dimensions"] == dn["output_spatial_dimensions"] == (1, 2)
    assert (dn["kernel_input_feature_dimension"], dn["kernel_output_feature_dimension"]) == (2, 3)
    assert dn["kernel_spatial_dimensions"] == (0, 1)
    relu = next(i for i in comp.instructions() if i.opcode == "stablehlo.compare")  # the ReLU's mask
    assert relu.attributes["comparison_direction"] == "GT"
    lhs, rhs = conv.operands
    out, x, w = _run(comp.with_outputs([conv, lhs, rhs]), ins)
    assert any(np.array_equal(x, a) for a in ins)  # the images, as recorded
    np.testing.assert_allclose(out, _conv_same_nhwc_hwio(x, w), rtol=1e-5, atol=1e-5)
    # the same op extracted alone runs on operands of our choosing
    one = comp.extract([conv])
    assert list(one.program_shape().parameter_shapes()) == [lhs.shape, rhs.shape]
    rng = np.random.default_rng(0)
    x2 = rng.standard_normal(x.shape).astype(np.float32)
    w2 = rng.standard_normal(w.shape).astype(np.float32)
    (got,) = _run(one, [x2, w2])
    np.testing.assert_allclose(got, _conv_same_nhwc_hwio(x2, w2), rtol=1e-5, atol=1e-4)


def test_extract_a_chain_makes_its_inputs_parameters() -> None:
    """Extracting the dense layer's dot and bias add of convnet_train (lowered.mlir): the inputs are the
    values the set reads from outside, the result is the one value no member of the set reads."""
    comp = xs.load_computation(DATA / "dumps/convnet_train/lowered.mlir")
    instrs = comp.instructions()
    dot = next(i for i in instrs if i.opcode == "stablehlo.dot_general")
    add = next(u for u in dot.users if u.opcode == "stablehlo.add")
    sub = comp.extract([dot, add])
    shapes = sub.program_shape().parameter_shapes()
    assert len(shapes) == 3 and sub.program_shape().result_shape() == add.shape
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s.dimensions()).astype(np.float32) for s in shapes]
    (got,) = _run(sub, args)
    other = next(o for o in add.operands if o is not dot)
    assert [p for p in sub.program_shape().parameter_names()] == [o.name for o in dot.operands] + [other.name]
    np.testing.assert_allclose(got, args[0] @ args[1] + args[2], rtol=1e-5, atol=1e-5)


def test_graph_of_a_built_computation_and_saving_an_edit(tmp_path: Path) -> None:
    b = xs.XlaBuilder("f")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)), "x")
    y = ops.Exp(x)
    z = ops.Mul(y, x)
    comp = b.build(ops.ReduceSum(z, [0]) if hasattr(ops, "ReduceSum") else z)
    instrs = comp.instructions()
    assert instrs[0].name == "x" and instrs[0].opcode == "parameter"
    exp = next(i for i in instrs if i.opcode == "stablehlo.exponential")
    edited = comp.with_outputs([exp])
    a = np.array([0.5, -1.0, 2.0], np.float32)
    (got,) = _run(edited, [a])
    np.testing.assert_allclose(got, np.exp(a), rtol=1e-6)
    for suffix in (".hlo", ".mlir", ".mlirbc", ".pb"):
        path = tmp_path / f"edited{suffix}"
        edited.save(path)
        (back,) = _run(xs.load_computation(path), [a])
        np.testing.assert_array_equal(back, got)


def test_multi_result_instructions_and_bad_names() -> None:
    comp = xs.load_computation(DATA / "dumps/gru_scan/lowered.mlir")
    ins, _ = recorded("dumps/gru_scan")
    loop = next(i for i in comp.instructions() if i.opcode == "stablehlo.while")
    with pytest.raises(xs.XlaSdkError, match=r"has \d+ results.*result\(k\)"):
        comp.with_outputs([loop])
    n = len(loop.shape.tuple_shapes())
    with pytest.raises(xs.XlaSdkError, match=f"has {n} results; result {n} does not exist"):
        loop.result(n)
    k = next(j for j, s in enumerate(loop.shape.tuple_shapes()) if s.dimensions() == () and s.numpy_dtype() == np.int32)
    counter, xs_again = _run(comp.with_outputs([loop.result(k), loop.result(0)]), ins)
    assert counter.shape == () and int(counter) == 6  # the scan ran over its 6 steps
    np.testing.assert_array_equal(xs_again, ins[9])  # the loop carries xs through unchanged
    with pytest.raises(xs.XlaSdkError, match="no instruction named 'add.99999'"):
        comp.instruction("add.99999")
    with pytest.raises(xs.XlaSdkError, match="out of range"):
        comp.instruction(10**6)
    with pytest.raises(xs.XlaSdkError, match="has one result"):
        comp.instruction(0).result(0)
    other = xs.load_computation(DATA / "dumps/int_indexing/lowered.mlir")
    with pytest.raises(xs.XlaSdkError, match="belongs to another computation"):
        comp.with_outputs([other.instructions()[-1]])
    with pytest.raises(xs.XlaSdkError, match="at least one"):
        comp.with_outputs([])


@pytest.mark.parametrize("corpus", ["dumps", "dumps_jax012"])
@pytest.mark.parametrize("fname", ["module.before_optimizations.txt", "module.before_optimizations.hlo.pb",
                                   "lowered.mlir", "exported.mlirbc"])
def test_sharded_program_keeps_its_partitioning(corpus: str, fname: str) -> None:
    """sharded_mlp (a batch split over 4 devices, weights replicated, a global sum): the graph keeps the
    module's shardings, meshes and num_partitions; with its first dot exposed it still runs on 4
    partitions from global inputs and gives JAX's bits, and the dot equals numpy's x @ w1."""
    program = f"{corpus}/sharded_mlp"
    ins, outs = recorded(program)
    comp = xs.load_computation(DATA / program / fname)
    graph = comp.instruction_graph()
    if fname.endswith((".mlir", ".mlirbc")):  # JAX's lowering: Shardy mesh and shardings, num_partitions
        assert dict(graph.module_attrs)["mhlo.num_partitions"] == "4 : i32"
        assert any(t.startswith('"sdy.mesh"') for t in graph.module_body)
        assert '"x"' in graph.params[0].attrs["sdy.sharding"].text
    dot = next(i for i in comp.instructions() if i.opcode in ("stablehlo.dot_general", "stablehlo.dot"))
    probe = comp.with_outputs([*graph.outputs, dot])
    if fname.endswith((".mlir", ".mlirbc")):
        assert "sdy.sharding" in probe.as_stablehlo_text() and "mhlo.num_partitions = 4" in probe.as_stablehlo_text()
    devices = xs.client("cpu", num_devices=4).devices()
    options = xs.CompileOptions(num_partitions=4)
    exe = xs.compile(probe, devices[0], options=options)
    y, total, h = (np.asarray(a.to_numpy()) for a in exe.execute_sharded(ins))
    # the same bits as the file itself on this machine; JAX's recorded bits, up to the machine's rounding
    # (the recorded dot was computed on another CPU: jaxlib 0.12's differs in the last bit on AVX-512 EPYC)
    original = [np.asarray(a.to_numpy()) for a in xs.compile(comp, devices[0], options=options).execute_sharded(ins)]
    assert _same_bits([y, total], original)
    assert_matches_jax([y, total], outs, f"{program}/{fname}")
    np.testing.assert_allclose(h, ins[0] @ ins[1], rtol=1e-5, atol=1e-5)


def _f32(b: xs.XlaBuilder, n: int, dims: tuple[int, ...], name: str) -> xs.XlaOp:
    return ops.Parameter(b, n, xs.Shape.array_shape(np.float32, dims), name)


def test_rewrite_a_built_computation_through_the_builder() -> None:
    b = xs.XlaBuilder("f")
    x = _f32(b, 0, (3,), "x")
    comp = b.build(ops.Mul(ops.Exp(x), x))
    rb = xs.XlaBuilder.from_computation(comp)
    e = rb.instruction(next(i.name for i in comp.instructions() if i.opcode == "stablehlo.exponential"))
    rb.replace(e, ops.Add(e, ops.Constant(rb, np.float32(1))))  # built from the value it replaces
    edited = rb.build()
    a = np.array([0.5, -1.0, 2.0], np.float32)
    (got,) = _run(edited, [a])
    np.testing.assert_allclose(got, (np.exp(a) + 1) * a, rtol=1e-6)
    (orig,) = _run(comp, [a])  # the computation itself is unchanged
    np.testing.assert_allclose(orig, np.exp(a) * a, rtol=1e-6)
    # other outputs, and an output replaced
    rb2 = xs.XlaBuilder.from_computation(comp)
    (out,) = rb2.outputs()
    rb2.replace(out, ops.Neg(out))
    neg, ex = _run(rb2.build([rb2.outputs()[0], rb2.instruction(e.opcode.split(".")[-1] + ".1")]), [a])
    np.testing.assert_allclose(neg, -np.exp(a) * a, rtol=1e-6)
    np.testing.assert_allclose(ex, np.exp(a), rtol=1e-6)


def test_rewrite_a_real_dump() -> None:
    """gru_scan: negate the vector jnp.sort sorts; the program's sorted output becomes sort(-v), the
    other outputs keep the bits of the unedited program run on this host (and are JAX's, within 4 ulps
    off the host that recorded them)."""
    ins, outs = recorded("dumps/gru_scan")
    comp = xs.load_computation(DATA / "dumps/gru_scan/module.before_optimizations.txt")
    call = next(i for i in comp.instructions() if i.opcode == "func.call" and i.shape.dimensions() == (48,))
    (presort,) = call.operands
    (v,) = _run(comp.with_outputs([presort]), ins)
    rb = xs.XlaBuilder.from_computation(comp)
    node = rb.instruction(presort.name)
    rb.replace(node, ops.Neg(node))
    got = _run(rb.build(), ins)
    np.testing.assert_array_equal(got[2], np.sort(-v))
    original = _run(comp, ins)
    assert not np.array_equal(got[2], original[2])  # the edit took
    for k, (g, o, w) in enumerate(zip(got, original, outs, strict=True)):
        if k != 2:
            assert_same_bits(g, o, f"output {k}")
            assert_same_or_within_ulps(g, w, what=f"output {k}")


def test_rewrite_reaches_inside_branches() -> None:
    """A conditional's branches read outer values directly (stablehlo.if): a replaced value is what
    they read."""
    b = xs.XlaBuilder("cond")
    p = ops.Parameter(b, 0, xs.Shape.array_shape(np.bool_, ()), "p")
    x = _f32(b, 1, (2,), "x")
    y = ops.Exp(x)
    tb = xs.XlaBuilder("t")
    t = ops.Mul(_f32(tb, 0, (2,), "a"), ops.Constant(tb, np.float32(2)))
    fb = xs.XlaBuilder("f")
    f = ops.Neg(_f32(fb, 0, (2,), "a"))
    comp = b.build(ops.Conditional(p, y, tb.build(t), y, fb.build(f)))
    rb = xs.XlaBuilder.from_computation(comp)
    name = next(i.name for i in comp.instructions() if i.opcode == "stablehlo.exponential")
    e = rb.instruction(name)
    rb.replace(e, ops.Add(e, ops.Constant(rb, np.float32(10))))
    edited = rb.build()
    a = np.array([0.25, -1.0], np.float32)
    (yes,) = _run(edited, [np.bool_(True), a])
    (no,) = _run(edited, [np.bool_(False), a])
    np.testing.assert_allclose(yes, (np.exp(a) + 10) * 2, rtol=1e-6)
    np.testing.assert_allclose(no, -(np.exp(a) + 10), rtol=1e-6)


def _sin_exp_rewrite() -> tuple[Any, Any, Any]:
    """A rewrite of sin(exp(x)), f32[3]: the builder and its exp and sin instructions."""
    b = xs.XlaBuilder("f")
    x = _f32(b, 0, (3,), "x")
    comp = b.build(ops.Sin(ops.Exp(x)))
    rb = xs.XlaBuilder.from_computation(comp)
    names = [i.name for i in comp.instructions()]
    e = rb.instruction(next(n for n in names if n.startswith("exponential")))
    s = rb.instruction(next(n for n in names if n.startswith("sine")))
    return rb, e, s


def test_rewrite_errors() -> None:
    rb, e, s = _sin_exp_rewrite()
    with pytest.raises(xs.ShapeError, match=r"shape f32\[2\], the instruction it replaces .*exponential.* f32\[3\]"):
        rb.replace(e, ops.Constant(rb, np.zeros(2, np.float32)))
    cycle = "computed from .sine.2. .*, which reads .exponential.1. .*the value it replaces"
    with pytest.raises(xs.ShapeError, match=cycle):
        rb.replace(e, ops.Cos(s))
    with pytest.raises(xs.ShapeError, match="not made by XlaBuilder.from_computation"):
        xs.XlaBuilder("plain").replace(e, e)
    other = xs.XlaBuilder("other")
    with pytest.raises(xs.ShapeError, match="must be an XlaOp of builder"):
        rb.replace(e, _f32(other, 0, (3,), "z"))
    with pytest.raises(xs.XlaSdkError, match="no instruction named"):
        rb.instruction("nope.1")


@pytest.mark.parametrize("fname", ["lowered.mlir", "exported.mlirbc", "exported.jax_export",
                                   "module.before_optimizations.txt"])
def test_partitioning_of_a_sharded_program(fname: str) -> None:
    comp = xs.load_computation(DATA / "dumps/sharded_mlp" / fname)
    part = comp.partitioning()
    assert part.is_partitioned
    if fname.startswith("module."):  # HLO: GSPMD shardings; the partition count stays in the HLO header
        assert part.parameter_shardings == ("{devices=[4,1]<=[4]}", "{replicated}", "{replicated}")
    else:
        assert (part.num_partitions, part.num_replicas) == (4, 1)
        assert part.meshes == ('@mesh = #sdy.mesh<["x"=4]>',)
        assert part.parameter_shardings[0] == '#sdy.sharding<@mesh, [{"x"}, {}]>'
    plain = xs.load_computation(DATA / "dumps/gru_scan/lowered.mlir").partitioning()
    assert not plain.is_partitioned and plain.num_partitions == 1


def test_cli_inspect_shows_the_partitioning() -> None:
    import json
    import subprocess
    import sys

    path = DATA / "dumps_jax012/sharded_mlp/lowered.mlir"
    r = subprocess.run([sys.executable, "-m", "xlasdk.cli", "inspect", str(path), "--no-compile"],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert "partitioning:  num_partitions=4, num_replicas=1" in r.stdout
    assert '  parameter 0  #sdy.sharding<@mesh, [{"x"}, {}]>' in r.stdout
    r = subprocess.run([sys.executable, "-m", "xlasdk.cli", "inspect", str(path), "--no-compile", "--json"],
                       capture_output=True, text=True, timeout=300, check=False)
    assert json.loads(r.stdout)["partitioning"]["meshes"] == ['@mesh = #sdy.mesh<["x"=4]>']


def test_new_user_findings() -> None:
    """What a new user's trial found: multi-result instructions by name, extracting a parameter, a second
    replace of one value, from_computation of a non-computation, file locations taken for op names."""
    ins, _ = recorded("dumps/gru_scan")
    comp = xs.load_computation(DATA / "dumps/gru_scan/lowered.mlir")
    loop = next(i for i in comp.instructions() if i.opcode == "stablehlo.while")
    assert comp.instruction(loop.name) is not None and comp.instruction(loop.index).name == loop.name
    assert comp.instruction(loop.name).result(0).shape == loop.shape.tuple_shapes()[0]
    whole = comp.extract([loop])  # every result of the loop, its operands made parameters
    assert whole.program_shape().result_shape() == loop.shape
    # lowered.mlir's locations are file locations ("-":48:43): no op name
    assert all(i.metadata.op_name == "" for i in comp.instructions())
    # a parameter extracted stays a parameter
    x9 = comp.extract([comp.instruction(9)])
    (got,) = _run(x9, [ins[9]])
    np.testing.assert_array_equal(got, ins[9])
    # a single item without a list
    (again,) = _run(comp.with_outputs(comp.instruction(9)), ins)
    np.testing.assert_array_equal(again, ins[9])
    # a StableHLO module has no HLO names: the error says which names there are
    with pytest.raises(xs.XlaSdkError, match="in a module loaded from HLO the HLO instruction names"):
        comp.instruction("Arg_0.1")
    # a second replace of one value is an error, not silently ignored
    b = xs.XlaBuilder("f")
    x = _f32(b, 0, (3,), "x")
    rb = xs.XlaBuilder.from_computation(b.build(ops.Exp(x)))
    e = rb.outputs()[0]
    rb.replace(e, ops.Mul(e, ops.Constant(rb, np.float32(2))))
    with pytest.raises(xs.ShapeError, match="was replaced already"):
        rb.replace(e, ops.Mul(e, ops.Constant(rb, np.float32(3))))
    with pytest.raises(xs.DTypeError, match="shape s32\\[3\\], the instruction it replaces"):
        rb.replace(rb.instruction("x"), ops.Constant(rb, np.zeros(3, np.int32)))
    with pytest.raises(xs.DTypeError, match="expected an XlaComputation"):
        xs.XlaBuilder.from_computation(None)  # type: ignore[arg-type]


# -- HLO names and opcodes of a module loaded from HLO -----------------------------------------------
def _entry_names(text: str) -> dict[str, str]:
    """``name -> opcode`` of the ENTRY computation's instructions, read from the dump's text."""
    import re

    body = text[text.index("\nENTRY"):]
    body = body[:body.index("\n}")]
    return {m.group(1): m.group(2) for m in re.finditer(
        r"^\s*(?:ROOT )?%?([\w.\-]+) = .*?\s([a-z][a-z\-]*)\(", body, re.M)}


@pytest.mark.parametrize("fname", ["module.before_optimizations.txt", "module.before_optimizations.hlo.pb"])
def test_hlo_dump_instructions_have_the_dumps_names(fname: str) -> None:
    """A dump's instructions are named as the dump names them (%while.78 is ``while.78``), with the
    dump's HLO opcodes; the former <opcode>.<index> names still find them; values are the file's."""
    comp = xs.load_computation(DATA / "dumps/gru_scan" / fname)
    entry = _entry_names((DATA / "dumps/gru_scan/module.before_optimizations.txt").read_text())
    instrs = comp.instructions()
    ops_ = [i for i in instrs if i.opcode != "parameter"]
    assert all(i.name in entry for i in ops_), [i.name for i in ops_ if i.name not in entry]
    assert all(i.hlo_opcode == entry[i.name] for i in ops_), [(i.name, i.hlo_opcode) for i in ops_]
    # parameters keep the program's parameter names; their HLO names find them too
    assert [i.name for i in instrs[:2]] == ["params['bh']", "params['br']"]
    assert comp.instruction("params__br__.1") is instrs[1] and instrs[1].hlo_opcode == "parameter"
    loops = [i for i in instrs if i.opcode == "stablehlo.while"]
    assert [i.name for i in loops] == ["while.78", "while.84"] and {i.hlo_opcode for i in loops} == {"while"}
    # op metadata is still the dump's
    assert loops[1].metadata.op_name == "jit(gru_forward)/while"
    # the former names: the first loop was instruction 15
    assert comp.instruction("while.15") is loops[0] and comp.instruction("while.78") is loops[0]
    # the exposed value of the dump's %while.84, element 2 (%while.87), is JAX's output 4
    ins, outs = recorded("dumps/gru_scan")
    (h,) = _run(comp.with_outputs([comp.instruction("while.84").result(2)]), ins)
    np.testing.assert_array_equal(h, outs[4])
    # extract names the parameters it makes after the instructions they come from
    one = comp.extract([comp.instruction("reshape.1")])
    assert one.program_shape().parameter_names() == ("while.78#3",)


def test_optimized_dump_names_and_opcodes() -> None:
    """An optimized dump: a fusion the import made a func.call is ``fusion`` under its own name, a
    bitcast made a reshape is ``bitcast``; the extra ops the importer makes for one tuple-shaped
    custom-call keep <opcode>.<index> names."""
    path = DATA / "dumps/int_indexing/module.cpu_after_optimizations.txt"
    comp = xs.load_computation(path)
    entry = _entry_names(path.read_text())
    by = {i.name: i for i in comp.instructions()}
    assert by["iota_reduce_fusion"].opcode == "func.call" and by["iota_reduce_fusion"].hlo_opcode == "fusion"
    assert by["bitcast"].opcode == "stablehlo.reshape" and by["bitcast"].hlo_opcode == "bitcast"
    assert by["custom-call"].opcode == "stablehlo.custom_call" and by["custom-call"].hlo_opcode == "custom-call"
    extra = [n for n, i in by.items() if n not in entry and i.opcode != "parameter"]
    assert extra == ["get_tuple_element.23", "get_tuple_element.24"], extra
    assert {by[n].hlo_opcode for n in extra} == {"get-tuple-element"}


def test_stablehlo_and_built_names_and_hlo_opcodes() -> None:
    """Modules not loaded from HLO keep <opcode>.<index> names; every instruction has an HLO opcode."""
    comp = xs.load_computation(DATA / "dumps/gru_scan/lowered.mlir")
    loop = next(i for i in comp.instructions() if i.opcode == "stablehlo.while")
    assert loop.name == f"while.{loop.index}" and loop.hlo_opcode == "while"
    b = xs.XlaBuilder("f")
    x = _f32(b, 0, (3,), "x")
    built = b.build(ops.Dot(ops.Add(x, x), x))
    assert [(i.name, i.opcode, i.hlo_opcode) for i in built.instructions()] == [
        ("x", "parameter", "parameter"), ("add.1", "stablehlo.add", "add"),
        ("dot_general.2", "stablehlo.dot_general", "dot"),
    ]


def test_hlo_names_pairing_that_is_not_one_to_one_keeps_the_plain_names() -> None:
    from xlasdk.program.graph_import import HloNames, _names

    b = xs.XlaBuilder("f")
    x = _f32(b, 0, (3,), "x")
    y = ops.Neg(x)
    order = [(y, "stablehlo.negate")]
    ok = HloNames(("Arg_0.1",), (("stablehlo.negate", "negate.2"),), {"negate.2": "negate"})
    names, aliases, opcodes = _names([x], order, ok)
    assert [n for n, _ in names] == ["x", "negate.2"] and aliases == {"Arg_0.1": 0, "negate.1": 1}
    assert opcodes == {1: "negate"}
    for bad in (HloNames((), (("stablehlo.negate", "negate.2"),), {}),  # another count
                HloNames(("Arg_0.1",), (("stablehlo.abs", "abs.2"),), {})):  # another op
        names, aliases, opcodes = _names([x], order, bad)
        assert [n for n, _ in names] == ["x", "negate.1"] and aliases == {} and opcodes == {}


def test_metadata_strip_is_the_generic_rewrite_on_every_real_dump() -> None:
    """``_metadata.without_metadata`` (the names import's input) empties each instruction's metadata
    and changes no other byte: equal, byte for byte, to the generic field rewrite
    (``_metadata._rewrite``) on every real dump's proto of both corpora, before and after
    optimizations (metadata longer than 127 bytes gives two-byte lengths; fusions nest computations)."""
    from xlasdk import _metadata
    from xlasdk._jaxlib import mlir as _mlir
    from xlasdk._metadata import without_metadata

    def generic(proto: bytes) -> bytes:
        def instruction(b: bytes) -> bytes:
            return _metadata._rewrite(b, 7, lambda md: b"")

        return _metadata._rewrite(proto, 3, lambda c: _metadata._rewrite(c, 2, instruction))

    files = sorted((DATA / "dumps").glob("*/module.*.txt")) + sorted((DATA / "dumps_jax012").glob("*/module.*.txt"))
    assert len(files) >= 10
    long_metadata = 0
    for f in files:
        if "{...}" in f.read_text():  # elided constants: refused at load (the .hlo.pb is the same module)
            continue
        proto = xs.load_computation(f).as_serialized_hlo_module_proto()  # what the names import gets
        stripped = without_metadata(proto)
        assert stripped == generic(proto), f
        for c in _metadata._fields(proto):  # a metadata of 128 bytes or more: a two-byte length
            if c[0] == 3:
                comp_bytes = _metadata._payload(proto, c[2], c[3])
                for ins in _metadata._fields(comp_bytes):
                    if ins[0] == 2:
                        ib = _metadata._payload(comp_bytes, ins[2], ins[3])
                        long_metadata += any(m[0] == 7 and m[3] - m[2] > 130 for m in _metadata._fields(ib))
        # the module without its metadata still reads, with the same instructions
        before = _mlir.hlo_instruction_opcodes(_mlir.hlo_module_from_proto(proto))
        assert _mlir.hlo_instruction_opcodes(_mlir.hlo_module_from_proto(stripped)) == before, f
    assert long_metadata >= 5


def test_rewrite_refuses_a_cycle_through_a_branch_operand() -> None:
    """A Conditional's branch operands are bound to its branches (region bindings), not operands of
    the node: replace used to miss a new value that reads the replaced one's user through them, and
    built a program that reads its own result."""
    rb, e, s = _sin_exp_rewrite()
    pred = ops.Constant(rb, np.bool_(True))
    new = ops.Conditional(pred, s, lambda v: ops.Cos(v), s, lambda v: ops.Neg(v))
    cycle = "computed from .sine.2. .*, which reads .exponential.1. .*the value it replaces"
    with pytest.raises(xs.ShapeError, match=cycle):
        rb.replace(e, new)
    # a new value that reads the old one itself is fine
    rb.replace(e, ops.Conditional(pred, e, lambda v: ops.Cos(v), e, lambda v: ops.Neg(v)))
    got = _run(rb.build(), [np.array([0.5, 1.0, -2.0], np.float32)])
    np.testing.assert_allclose(got[0], np.sin(np.cos(np.exp([0.5, 1.0, -2.0]))), rtol=1e-6)
