"""One computation model: built or loaded, an XlaComputation is a typed graph and its verified
module, each made from the other on first need (``xlasdk/program/computation.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk.builder import Computation
from xlasdk.errors import CompileError, XlaSdkError
from xlasdk.program.computation import compile_request
from xlasdk.program.static_interface import static_interface

DUMP = Path(__file__).parent / "data" / "dumps" / "int_indexing" / "module.before_optimizations.txt"


def _built() -> tuple[xs.XlaComputation, xs.XlaOp, xs.XlaOp]:
    b = xs.XlaBuilder("f")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)), "x")
    root = ops.Mul(ops.Exp(x), x)
    return b.build(root), x, root


DATA = Path(__file__).resolve().parent / "data"


def test_a_built_computation_is_its_builders_graph() -> None:
    comp, x, root = _built()
    g = comp.graph()
    assert isinstance(comp, Computation) and comp.source_format is None
    assert g.root is root and g.parameters == (x,) and g.side_effects == () and g.context is None
    assert g.name == "f" and g.builder is root.builder
    text = comp.as_stablehlo_text()
    assert "stablehlo.exponential" in text and "@main" in text
    assert "stablehlo.exponential" in str(comp.compiler_ir())
    assert comp.compiler_ir() is comp.compiler_ir()  # parsed once
    req = compile_request(comp)
    assert not req.from_file and not req.host_callbacks and req.program_shape == comp.program_shape()
    assert req.heap_bytes == 3 * 12  # x, exp(x), mul: one f32[3] (12 bytes) each


def test_a_loaded_computation_imports_its_graph_on_first_need() -> None:
    comp = xs.load_computation(DUMP)
    assert comp._graph_cache is None  # loading does not import the graph
    exe = xs.compile(comp)
    assert comp._graph_cache is None  # nor does compiling
    g = comp.graph()
    assert comp.graph() is g
    ps = comp.program_shape()
    assert [p.shape for p in g.parameters] == list(ps.parameter_shapes())
    assert g.root.shape == ps.result_shape()
    assert g.context is not None and isinstance(g.context, xs.ModuleContext)
    assert compile_request(comp).from_file
    # the graph's root computes what the file computes: its outputs exposed give the same bits
    args = [np.arange(int(np.prod(s.dimensions())), dtype=s.numpy_dtype()).reshape(s.dimensions())
            for s in ps.parameter_shapes()]
    want = exe(*args)
    got = xs.compile(comp.with_outputs(list(comp.instruction_graph().outputs)))(*args)
    for w, h in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,),
                    strict=True):
        np.testing.assert_array_equal(np.asarray(w), np.asarray(h))


def test_a_loaded_computation_is_refused_as_a_sub_computation_with_the_reason() -> None:
    comp = xs.load_computation(DUMP)
    b = xs.XlaBuilder("outer")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, ()), "x")
    with pytest.raises(XlaSdkError, match="was loaded from a file; only computations built with an XlaBuilder"):
        ops.Map(b, [x], comp, [])


def test_static_interface_rewrites_dynamic_shapes_as_a_graph() -> None:
    b = xs.XlaBuilder("dyn")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (5,), dynamic_dimensions=[True]), "x")
    y = ops.Add(x, x)
    comp = b.build(y)
    rw = static_interface(comp)
    ps = rw.computation.program_shape()
    assert [str(s) for s in ps.parameter_shapes()] == ["f32[5]", "s32[]"]
    assert list(ps.parameter_names()) == ["x", "x_size0"]
    assert rw.n_results == 1 and rw.dynamic_results == ((0, 0),) and rw.dynamic_params == ((0, (0,)),)
    assert b.get_program_shape().result_shape() == y.shape  # the builder's default root did not move
    exe = xs.compile(comp)
    np.testing.assert_array_equal(exe(np.array([1, 2], np.float32)).to_numpy(), [2, 4])
    loaded = xs.XlaComputation.from_stablehlo(comp.as_stablehlo_text())
    with pytest.raises(CompileError, match="was loaded from a file"):
        static_interface(loaded)


def test_compile_takes_only_computations() -> None:
    with pytest.raises(TypeError, match="expected an XlaComputation, got str"):
        xs.compile("module {}")  # type: ignore[arg-type]


def test_partitioning_of_hlo_text_reads_the_header_counts(tmp_path: Path) -> None:
    """XLA's HLO -> StableHLO import drops the header's num_partitions / replica_count; a loaded
    text keeps them as JAX's module attributes (the new-user trial's sharded dump said None)."""
    body = "\n\nENTRY main {\n  p = f32[3] parameter(0)\n  ROOT r = f32[3] add(p, p)\n}\n"
    path = tmp_path / "m.hlo"
    path.write_text("HloModule m, replica_count=2, num_partitions=4" + body)
    comp = xs.load_computation(path)
    part = comp.partitioning()
    assert (part.num_partitions, part.num_replicas) == (4, 2)
    assert "mhlo.num_partitions = 4 : i32" in comp.as_stablehlo_text()
    x = np.array([1.0, -2.5, 3.0], np.float32)
    np.testing.assert_array_equal(xs.compile(comp)(x).to_numpy(), x + x)  # one device by default still
    # without the header, or from a proto (XLA keeps the counts in its module config, not the proto)
    plain = xs.XlaComputation.from_hlo_text("HloModule m" + body)
    assert (plain.partitioning().num_partitions, plain.partitioning().num_replicas) == (None, None)
    proto = xs.XlaComputation.from_hlo_proto(comp.as_serialized_hlo_module_proto())
    assert proto.partitioning().num_partitions is None
    one = xs.XlaComputation.from_hlo_text("HloModule m, num_partitions=1" + body)
    assert one.partitioning().num_partitions is None  # 1 is the default: nothing recorded


@pytest.mark.parametrize("dump", ["dumps/gru_scan/module.cpu_after_optimizations.txt",
                                  "dumps_jax012/int_indexing/module.before_optimizations.hlo.pb"])
def test_edited_programs_keep_the_instruction_names_they_had(dump: str) -> None:
    """with_outputs / extract of a module loaded from HLO name every instruction they keep as the
    dump does (they named them <opcode>.<index> again), and the name finds the same op, with its
    HLO opcode; the exposed value is the original's."""
    comp = xs.load_computation(DATA / dump)
    ins = comp.instructions()
    body = [i for i in ins if i.opcode != "parameter" and i.shape.is_array()]
    mid, nxt = body[len(body) // 2], body[len(body) // 2 + 1]
    before = {i.name: i for i in ins}
    exposed = comp.with_outputs([mid])
    for i in exposed.instructions():
        assert i.name in before, (i.name, [j.name for j in exposed.instructions()])
        assert (i.opcode, i.hlo_opcode, i.shape) == (before[i.name].opcode, before[i.name].hlo_opcode,
                                                     before[i.name].shape)
    assert exposed.instruction(mid.name).opcode == mid.opcode
    cut = comp.extract([mid, nxt])
    kept = [i.name for i in cut.instructions() if i.opcode != "parameter"]
    assert set(kept) <= {mid.name, nxt.name} and mid.name in kept, kept
    args = xs.random_inputs(comp, seed=3)
    (want,) = xs.evaluate(comp.with_outputs([mid]), *args)  # the reference evaluator: an independent oracle
    np.testing.assert_allclose(xs.compile(exposed)(*args).to_numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("corpus", ["dumps", "dumps_jax012"])
def test_a_fusions_function_is_walked_as_the_dump_writes_it(corpus: str) -> None:
    """Each fusion of an optimized dump is a func.call; called_function() walks the function it
    calls, and its instructions are the dump's fused computation's (bitcasts read as reshapes, as the
    import of an optimized dump writes them)."""
    import re

    path = DATA / corpus / "transformer_bf16/module.cpu_after_optimizations.txt"
    text = path.read_text()
    comp = xs.load_computation(path)
    calls = [i for i in comp.instructions() if i.opcode == "func.call"]
    assert len(calls) >= 20
    for call in calls:
        fn = call.called_function()
        assert fn is call.called_function()  # imported once
        block = re.search(r"^%" + re.escape(fn.name) + r" \(.*?\{\n(.*?)^\}", text, re.M | re.S)
        assert block is not None, fn.name
        want = sorted("reshape" if o == "bitcast" else o for o in re.findall(
            r"^\s*(?:ROOT )?%\S+ = \S+(?:\{[^}]*\})? ([a-z][\w-]*)\(", block.group(1), re.M))
        assert sorted(i.hlo_opcode for i in fn.instructions) == want, fn.name
        assert [i.shape for i in fn.instructions if i.opcode == "parameter"] == [o.shape for o in call.operands]
    with pytest.raises(XlaSdkError, match="calls no function"):
        comp.instructions()[0].called_function()  # a parameter


@pytest.mark.parametrize("corpus", ["dumps", "dumps_jax012"])
@pytest.mark.parametrize("fname", ["module.cpu_after_optimizations.txt", "module.cpu_after_optimizations.hlo.pb"])
def test_an_optimized_bf16_dump_computes_its_programs_bits(corpus: str, fname: str) -> None:
    """XLA's optimized dump compiles without excess precision by default: with it, XLA drops the
    f32 -> bf16 -> f32 roundings its first compile placed, and jaxlib 0.10.2 computes other bits
    for the jax 0.12 transformer's dump (a new-user trial: 174 of 512 elements of a bf16 attention
    block by up to 2^-6). The oracle: the same program before optimizations, as JAX compiles it."""
    from xlasdk.program.computation import from_optimized_dump
    from xlasdk.runtime._compile import _OPTIMIZED_DUMP_OVERRIDE

    d = DATA / corpus / "transformer_bf16"
    before = xs.load_computation(d / "module.before_optimizations.txt")
    args = xs.random_inputs(before, seed=11)

    def run(comp: xs.XlaComputation, **options: object) -> list[bytes]:
        opts = xs.CompileOptions(env_option_overrides=options) if options else None
        out = xs.compile(comp, cache=None, options=opts)(*args)
        return [np.asarray(o.to_numpy()).tobytes() for o in (out if isinstance(out, tuple) else (out,))]

    comp = xs.load_computation(d / fname)
    assert from_optimized_dump(comp) and not from_optimized_dump(before)
    exposed = comp.with_outputs(list(comp.instruction_graph().outputs))
    assert from_optimized_dump(exposed)  # an edit of the dump keeps its precision
    assert _OPTIMIZED_DUMP_OVERRIDE == ("xla_allow_excess_precision", False)
    want = run(before)
    assert run(comp) == want and run(exposed) == want
    assert run(comp, xla_allow_excess_precision=False) == want  # the user's own setting is kept as given


#: what an XlaComputation holds (issue 44, step 2): its name, program shape and origin, and the
#: caches of its graph and instruction index; everything that differs with where the program came
#: from is its origin's
_STATE = {"_name", "_program_shape", "_origin", "_graph_cache", "_instruction_graph"}


def _exercised(comp: xs.XlaComputation) -> xs.XlaComputation:
    """``comp`` printed, walked and converted (every form its origin makes)."""
    comp.as_stablehlo_text()
    comp.as_hlo_text()
    comp.as_serialized_hlo_module_proto()
    comp.instructions()
    comp.graph()
    compile_request(comp)
    return comp


def test_each_origin_is_an_object_and_the_computation_holds_only_caches() -> None:
    from xlasdk.program.origin import Built, Edited, Loaded, LoadedHlo, StaticRewrite

    comp, _, _ = _built()
    loaded_hlo = xs.load_computation(DUMP)
    loaded = xs.XlaComputation.from_stablehlo(comp.as_stablehlo_text())
    edited = loaded_hlo.with_outputs(list(loaded_hlo.instruction_graph().outputs))
    b = xs.XlaBuilder("dyn")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (5,), dynamic_dimensions=[True]), "x")
    dyn = b.build(ops.Add(x, x))
    rewritten = static_interface(dyn).computation
    kinds = [(comp, Built, None), (loaded_hlo, LoadedHlo, "hlo"), (loaded, Loaded, "mlir"),
             (edited, Edited, "hlo"), (rewritten, StaticRewrite, None)]
    for c, kind, fmt in kinds:
        assert type(c.origin) is kind and c.source_format == fmt
        assert set(vars(_exercised(c))) == _STATE, (kind, sorted(vars(c)))
    assert comp._built() is comp.graph() and rewritten._built() is not None
    assert [c._built() for c in (loaded_hlo, loaded, edited)] == [None, None, None]
    assert compile_request(rewritten).static_interface and not compile_request(comp).static_interface
    assert compile_request(rewritten).heap_bytes == compile_request(dyn).heap_bytes == 2 * 20  # x, x + x: f32[<=5]
    assert [compile_request(c).heap_bytes for c in (loaded_hlo, loaded, edited)] == [0, 0, 0]


def test_a_computation_is_made_of_an_origin() -> None:
    from xlasdk.program.origin import Loaded

    with pytest.raises(TypeError, match="expected an origin"):
        xs.XlaComputation("f", xs.ProgramShape([], xs.Shape.scalar_shape(np.float32)), "module {}")  # type: ignore[arg-type]
    text = ("module @f { func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {\n"
            "  %0 = stablehlo.add %a, %a : tensor<3xf32>\n  return %0 : tensor<3xf32>\n} }")
    s = xs.Shape.array_shape(np.float32, (3,))
    comp = xs.XlaComputation("f", xs.ProgramShape([s], s, ["a"]), Loaded("mlir", text))
    out = xs.compile(comp)(np.array([1, 2, 3], np.float32)).to_numpy()
    np.testing.assert_array_equal(out, [2, 4, 6])  # oracle: 2 * a


def test_no_module_outside_program_calls_a_private_constructor_of_the_computation() -> None:
    """``XlaComputation(name, program_shape, origin)`` and the origins' constructors are the ways
    to make one: nothing outside ``xlasdk/program/`` reads a private name of the class."""
    import ast

    own = {n for n in vars(xs.XlaComputation) if n.startswith("_") and not n.startswith("__")}
    assert not own & {"_new", "_from_builder", "_from_loaded", "_edited", "_with_static_interface"}
    pkg = Path(xs.__file__).parent
    bad = []
    for path in sorted(pkg.rglob("*.py")):
        if path.parent.name == "program":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr in own
                    and isinstance(node.value, ast.Name) and node.value.id == "XlaComputation"):
                bad.append(f"{path.relative_to(pkg)}:{node.lineno} XlaComputation.{node.attr}")
    assert not bad, bad
