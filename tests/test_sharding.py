"""xs.HloSharding (xlasdk/sharding.py): XLA's sharding notation parsed, printed, validated; shardings
on parameters, ops and results of a built computation, in HLO and StableHLO text and every file
format; compile-time checks against the number of partitions."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from jaxlib import xla_client as xc

import xlasdk as xs
from tests.helpers import raises
from xlasdk import ops
from xlasdk.sharding import HloSharding

DATA = Path(__file__).parent / "data" / "spmd"

# Every form XLA's printer writes (and a few it reads), each with its canonical text.
NOTATION = [
    ("{replicated}", "{replicated}"),
    ("{manual}", "{manual}"),
    ("{unknown}", "{unknown}"),
    ("{unreduced}", "{unreduced}"),
    ("{maximal device=1}", "{maximal device=1}"),
    ("{devices=[2,2]0,1,2,3}", "{devices=[2,2]0,1,2,3}"),
    ("{devices=[2,2]0,2,1,3}", "{devices=[2,2]0,2,1,3}"),
    ("{devices=[2,2]2,3,0,1}", "{devices=[2,2]2,3,0,1}"),
    ("{devices=[4]<=[4]}", "{devices=[4]<=[4]}"),
    ("{devices=[3]<=[3]}", "{devices=[3]<=[3]}"),
    ("{devices=[2,2]<=[2,2]T(1,0)}", "{devices=[2,2]<=[2,2]T(1,0)}"),
    ("{devices=[4,2]<=[2,4]T(1,0)}", "{devices=[4,2]<=[2,4]T(1,0)}"),
    ("{devices=[4]<=[2,2]T(0,1)}", "{devices=[4]<=[4]}"),
    ("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}", "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"),
    ("{devices=[2,2]<=[4] last_tile_dim_replicate}", "{devices=[2,2]<=[4] last_tile_dim_replicate}"),
    ("{devices=[2,1,2]0,2,1,3 last_tile_dims={manual}}", "{devices=[2,1,2]0,2,1,3 last_tile_dims={manual}}"),
    ("{devices=[2,1,2]0,1,2,3 last_tile_dims={unreduced}}", "{devices=[2,1,2]0,1,2,3 last_tile_dims={unreduced}}"),
    ("{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}",
     "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}"),
    ("{devices=[2,2]0,1,2,3 last_tile_dims={replicated}}", "{devices=[2,2]0,1,2,3 last_tile_dim_replicate}"),
    ("{devices=[2,2,1]0,1,2,3 last_tile_dim_replicate}", "{devices=[2,2]0,1,2,3}"),
    ("{devices=[4]0,1,2,3 last_tile_dim_replicate}", "{replicated}"),
    ("{devices=[1,4]0,1,2,3 last_tile_dims={replicated}}", "{replicated}"),
    ("{devices=[1,1,4]0,1,2,3 last_tile_dims={manual}}", "{manual}"),
    ("{devices=[1,2]0,1}", "{devices=[1,2]0,1}"),
    ("{devices=[2,1]0,1 shard_as 1}", "{devices=[2,1]0,1 shard_as 1}"),
    ("{devices=[2,1]0,1 shard_like 3}", "{devices=[2,1]0,1 shard_like 3}"),
    ('{maximal device=0 metadata={op_name="a" source_file="x.py"}}', "{maximal device=0}"),
    ('{replicated metadata={op_name="jit(f)/x}"}}', "{replicated}"),
    ("{  replicated  }", "{replicated}"),
    ("{devices=[2,2] 0, 1, 2, 3}", "{devices=[2,2]0,1,2,3}"),
    ("{{replicated}, {devices=[2]0,1}}", "{{replicated}, {devices=[2]0,1}}"),
    ("{{replicated}}", "{{replicated}}"),
    ("{}", "{}"),
]


@pytest.mark.parametrize(("text", "canonical"), NOTATION)
def test_notation_parses_and_prints(text: str, canonical: str) -> None:
    s = HloSharding.parse(text)
    assert s.to_hlo() == str(s) == canonical
    assert HloSharding.parse(s.to_hlo()) == s
    assert hash(HloSharding.parse(s.to_hlo())) == hash(s)
    assert s.to_mlir() == '"' + canonical + '"'
    # The same placement as XLA's own parser gives (XLA normalizes some iotas differently).
    mine_from_xla = HloSharding.parse(str(xc.HloSharding.from_string(text)))
    assert mine_from_xla == s, (str(xc.HloSharding.from_string(text)), canonical)


@pytest.mark.parametrize(("text", "canonical"), [c for c in NOTATION if not c[1].startswith("{{") and c[1] != "{}"])
def test_expanded_devices_match_xla(text: str, canonical: str) -> None:
    s = HloSharding.parse(text)
    x = xc.HloSharding.from_string(canonical)
    if s.is_tiled:
        assert list(s.tile_assignment_dimensions) == list(x.tile_assignment_dimensions())
        assert s.replicate_on_last_tile_dim == x.replicate_on_last_tile_dim()
        if not s.replicate_on_last_tile_dim:  # XLA may reorder devices inside a replication group
            assert list(s.tile_assignment_devices) == list(x.tile_assignment_devices())
    assert s.is_replicated == x.is_replicated() and s.is_manual == x.is_manual()  # XLA: replicated is "maximal" too


def test_xla_dump_of_a_jax_named_sharding_program() -> None:
    """Every sharding XLA printed in the dump of a JAX program on a 2x4 mesh
    (tools/make_spmd_fixture.py) reads back as printed, and as JAX described each array."""
    info = json.loads((DATA / "shardings.json").read_text())
    for text in info["hlo_text"]:
        assert HloSharding.parse(text).to_hlo() == text
    for name in ("module.before_optimizations.txt", "module.after_optimizations.txt"):
        body = (DATA / name).read_text()
        found = re.findall(r"sharding=(\{(?:[^{}]|\{[^{}]*\})*\})", body)
        assert found
        for text in found:
            assert HloSharding.parse(text).to_hlo() == text
    a, w, v = (HloSharding.parse(t) for t in info["inputs"])
    assert a == HloSharding.tile([2, 1, 4], last_tile_dim_replicate=True)
    assert w == HloSharding.iota_tile([1, 4, 2], [2, 4], [1, 0], last_tile_dim_replicate=True)
    assert v == HloSharding.tile([2, 4]) == HloSharding.tile([2, 4], np.arange(8).reshape(2, 4))
    assert w.tile_assignment_devices == (0, 4, 1, 5, 2, 6, 3, 7)
    assert [x.tile_shape((16, 8)) for x in (a, w, v)] == [(8, 8), (16, 2), (8, 2)]
    out0 = HloSharding.parse(info["outputs"][0])
    assert out0.tile_counts == (4,) and out0.device_tiles(8) == [(0,), (1,), (2,), (3,), (0,), (1,), (2,), (3,)]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty text"),
        ("replicated", "expected '{'"),
        ("{devices=[2]0,1", "end of the text"),
        ("{foo}", "unknown sharding attribute 'foo' at column 2"),
        ("{maximal}", "needs 'device=N'"),
        ("{{{replicated}}}", "cannot nest"),
        ("{{}}", "expected a sharding inside"),
        ("{replicated devices=[2]0,1}", "takes no devices"),
        ("{devices=[2]-1,0}", "expected a number >= 0, got -1"),
        ("{devices=[]0}", "expected a number"),
        ("{devices=[2,2]0,1,2}", "needs 4 devices, got 3"),
        ("{devices=[2,2]0,0,1,2}", "device 0 appears twice"),
        ("{devices=[2,2]<=[2,2]T(1,1)}", "not a permutation"),
        ("{devices=[2,2]<=[3]}", "holds 3 devices"),
        ("{devices=[2]0,1 last_tile_dims={other}}", "unknown last_tile_dims kind 'other'"),
        ("{devices=[2,1]0,1 last_tile_dim_replicate last_tile_dims={manual}}", "not both"),
        ("{devices=[2]0,1 last_tile_dims={manual, manual, manual}}", "3 subgroup dimensions"),
        ("{replicated} {manual}", "after the sharding"),
        ("{devices=[2]0,1 $}", "unexpected character '$'"),
    ],
)
def test_bad_notation_is_a_shape_error(text: str, words: str) -> None:
    with pytest.raises(xs.ShapeError, match=re.escape(words)):
        HloSharding.parse(text)


def test_constructors_and_properties() -> None:
    assert HloSharding.replicate() == "{replicated}" and HloSharding.replicate().is_replicated
    m = HloSharding.maximal(3)
    assert m.is_maximal and m.device == 3 and m.tile_assignment_devices == (3,) and str(m) == "{maximal device=3}"
    t = HloSharding.tile([2, 2], devices=[0, 2, 1, 3])
    assert t.is_tiled and t.tile_counts == (2, 2) and t.tiled_data_rank == 2 and t.num_devices == 4
    assert t == HloSharding.iota_tile([2, 2], [2, 2], [1, 0])
    assert HloSharding.tile([4, 1]) == "{devices=[4,1]0,1,2,3}"
    assert str(HloSharding.tile([4, 1])) == "{devices=[4,1]<=[4]}"
    sub = HloSharding.tile([2, 2, 2], last_tile_dims=["manual", "replicated"])
    assert sub.last_tile_dims == ("manual", "replicated")
    assert HloSharding.tile([1, 1], devices=[0]) == HloSharding.replicate()  # one tile: replicated
    tup = HloSharding.tuple_sharding(["{replicated}", t, xs.OpSharding()])
    assert tup.is_tuple and len(tup.tuple_elements) == 3 and tup.num_devices == 4
    assert str(tup) == "{{replicated}, {devices=[2,2]0,2,1,3}, {replicated}}"
    assert repr(t) == "HloSharding('{devices=[2,2]0,2,1,3}')"
    assert t != "{devices=[2,2]0,1,2,3}" and t != "not a sharding" and t != 3
    assert len({t, HloSharding.parse("{devices=[2,2]<=[2,2]T(1,0)}"), HloSharding.replicate()}) == 2
    with pytest.raises(xs.ShapeError, match="not a maximal"):
        _ = t.device
    with pytest.raises(xs.ShapeError, match="flat"):
        HloSharding.tuple_sharding([tup])
    with pytest.raises(xs.DTypeError, match="expected a sharding"):
        HloSharding.of(42)
    with pytest.raises(xs.ShapeError, match=r"devices has shape \[4, 1\], expected"):
        HloSharding.tile([2, 2], devices=np.arange(4).reshape(4, 1))
    with pytest.raises(xs.ShapeError, match="must be >= 1"):
        HloSharding.tile([0, 2])
    with pytest.raises(TypeError, match="HloSharding.parse"):
        HloSharding()


@pytest.mark.parametrize("text", [t for t, _ in NOTATION if "shard_" not in t])  # OpSharding has no shard groups
def test_op_sharding_round_trip(text: str) -> None:
    s = HloSharding.parse(text)
    op = s.to_op_sharding()
    assert isinstance(op, xs.OpSharding)
    assert HloSharding.from_op_sharding(op) == s == HloSharding.of(op)
    assert op.to_hlo_string() == s.to_hlo()


def test_op_sharding_fields_mirror_the_proto() -> None:
    op = HloSharding.parse("{devices=[4,2]<=[2,4]T(1,0) last_tile_dim_replicate}").to_op_sharding()
    assert op.type == xs.OpSharding.Type.OTHER and op.tile_assignment_dimensions == [4, 2]
    assert op.iota_reshape_dims == [2, 4] and op.iota_transpose_perm == [1, 0] and op.replicate_on_last_tile_dim
    assert op.tile_assignment_devices == []
    sub = HloSharding.parse("{devices=[2,1,2]0,2,1,3 last_tile_dims={manual}}").to_op_sharding()
    assert sub.last_tile_dims == [xs.OpSharding.Type.MANUAL]
    proto = xc.OpSharding()  # jaxlib's proto, same field names
    for f in ("type", "tile_assignment_dimensions", "tile_assignment_devices", "last_tile_dims", "iota_reshape_dims",
              "iota_transpose_perm", "replicate_on_last_tile_dim", "tuple_shardings"):
        assert hasattr(proto, f), f


def test_validate_against_devices_and_shapes() -> None:
    t = HloSharding.parse("{devices=[4,1]0,1,2,3}")
    t.validate(4)
    t.validate(4, (8, 2))
    t.validate(4, xs.Shape.array_shape(np.float32, (8, 2)))
    with pytest.raises(xs.ShapeError, match=r"names device 3, but there are 2 devices \(0..1\)"):
        t.validate(2)
    with pytest.raises(xs.ShapeError, match=r"tiles over 4 devices, but there are 8 devices: XLA needs every device.*"
                                            r"\{devices=\[4,1,2\]<=\[8\] last_tile_dim_replicate\}"):
        t.validate(8)
    with pytest.raises(xs.ShapeError, match=r"splits 2 dimensions, but shape \[8\] has rank 1"):
        t.validate(4, (8,))
    with pytest.raises(xs.ShapeError, match="names device 5, but there are 4"):
        HloSharding.maximal(5).validate(4)
    HloSharding.replicate().validate(1, (3, 3))
    tup = HloSharding.parse("{{replicated}, {devices=[2]0,1}}")
    tup.validate(2, xs.Shape.tuple_shape([xs.Shape.array_shape(np.float32, ()), xs.Shape.array_shape(np.int32, (4,))]))
    with pytest.raises(xs.ShapeError, match="has 2 elements, but the value"):
        tup.validate(2, xs.Shape.tuple_shape([xs.Shape.array_shape(np.float32, (2,))]))
    with pytest.raises(xs.ShapeError, match="tiles over 2 devices"):
        tup.validate(4)


def test_tile_geometry() -> None:
    s = HloSharding.parse("{devices=[2,2]0,2,1,3}")
    assert s.tile_shape((8, 6)) == (4, 3) and s.tile_shape((7, 5)) == (4, 3)
    assert s.device_tiles(4) == [(0, 0), (1, 0), (0, 1), (1, 1)]
    sl = s.shard_slices((7, 5), 4)
    assert sl[3] == (slice(4, 7), slice(3, 5)) and sl[1] == (slice(4, 7), slice(0, 3))
    m = HloSharding.maximal(1)
    assert m.device_tiles(3) == [None, (), None] and m.tile_shape((2, 3)) == (2, 3)
    r = HloSharding.parse("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}")
    assert r.device_tiles(4) == [(0, 0), (0, 0), (1, 0), (1, 0)] and r.tile_shape((6, 3)) == (3, 3)
    with pytest.raises(xs.ShapeError, match="no global array"):
        HloSharding.manual().shard_slices((2,), 2)
    with pytest.raises(xs.ShapeError, match="tuple"):
        HloSharding.parse("{{replicated}}").tile_shape((2,))


# -- on a built computation --------------------------------------------------------------------
def _f32(*dims: int) -> xs.Shape:
    return xs.Shape.array_shape(np.float32, dims)


def _sharded_matmul() -> xs.XlaComputation:
    b = xs.XlaBuilder("sharded_mm")
    with b.sharding("{devices=[4,1]<=[4]}"):
        x = ops.Parameter(b, 0, _f32(8, 16), "x")
    b.set_sharding(xs.OpSharding())  # the old proto style: replicated
    w = ops.Parameter(b, 1, _f32(16, 4), "w")
    b.clear_sharding()
    with b.sharding(HloSharding.tile([4, 1])):
        y = ops.Tanh(ops.Dot(x, w) * 0.5)  # the scalar 0.5 stays unannotated
    return b.build(y)


def test_shardings_on_parameters_ops_and_result() -> None:
    comp = _sharded_matmul()
    shlo = comp.as_stablehlo_text()
    assert '%arg0: tensor<8x16xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"}' in shlo
    assert '%arg1: tensor<16x4xf32> {mhlo.sharding = "{replicated}"}' in shlo
    assert '-> (tensor<8x4xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"})' in shlo
    assert 'stablehlo.tanh %' in shlo and shlo.count('mhlo.sharding = "{devices=[4,1]<=[4]}"') >= 4
    hlo = comp.as_hlo_text()
    assert "parameter(0), sharding={devices=[4,1]<=[4]}" in hlo
    assert "parameter(1), sharding={replicated}" in hlo
    assert re.search(r"tanh\([^)]*\), sharding=\{devices=\[4,1\]<=\[4\]\}", hlo)


def test_sharding_scope_restores_and_checks_ranks() -> None:
    b = xs.XlaBuilder("scope")
    b.set_sharding("{maximal device=0}")
    with b.sharding("{devices=[2]0,1}"):
        x = ops.Parameter(b, 0, _f32(4), "x")
        assert b.get_sharding() == "{devices=[2]0,1}"
        c = ops.Constant(b, np.float32(2))  # a scalar under a tiled sharding: left unannotated
    assert b.get_sharding() == HloSharding.maximal(0)
    assert x.sharding == "{devices=[2]0,1}" and c.sharding is None
    y = ops.Neg(x)
    assert y.sharding == HloSharding.maximal(0)
    b.set_sharding(None)
    assert ops.Abs(x).sharding is None
    with b.sharding("{devices=[2,1]0,1}"):
        with raises(xs.ShapeError, "negate: sharding {devices=[2,1]0,1} splits 2 dimensions", "rank 1"):
            ops.Neg(x)
        with raises(xs.ShapeError, "Parameter: sharding", "f32[2] has rank 1"):
            ops.Parameter(b, 1, _f32(2), "y")
    with raises(xs.ShapeError, "set_sharding", "device 0 appears twice"):
        b.set_sharding("{devices=[2]0,0}")
    with raises(xs.DTypeError, "set_sharding", "expected a sharding"):
        b.set_sharding(2)


def test_tuple_results_take_tuple_shardings() -> None:
    b = xs.XlaBuilder("tup")
    x = ops.Parameter(b, 0, _f32(4, 2), "x")
    with b.sharding("{{devices=[2,1]0,1}, {replicated}}"):
        t = ops.Tuple(b, [ops.Neg(x) if False else x, x])  # the tuple op itself: one sharding per element
    assert t.sharding == "{{devices=[2,1]0,1}, {replicated}}"
    with b.sharding("{devices=[2,1]0,1}"):
        u = ops.Tuple(b, [x, x])  # one sharding for every element
    assert u.sharding == "{{devices=[2,1]0,1}, {devices=[2,1]0,1}}"
    with b.sharding("{{replicated}}"):
        with raises(xs.ShapeError, "has 1 elements, but the result"):
            ops.Tuple(b, [x, x])
    with b.sharding("{devices=[2,1]0,1}"):
        y = ops.Neg(x)
    with b.sharding("{replicated}"):
        z = ops.Abs(x)
    comp = b.build([y, z])
    assert ('-> (tensor<4x2xf32> {mhlo.sharding = "{devices=[2,1]0,1}"}, tensor<4x2xf32> {mhlo.sharding = '
            '"{replicated}"})') in comp.as_stablehlo_text()


@pytest.mark.parametrize("suffix", [".hlo", ".mlir", ".mlirbc", ".pb"])
def test_shardings_round_trip_through_files(tmp_path: Path, suffix: str) -> None:
    comp = _sharded_matmul()
    path = tmp_path / f"m{suffix}"
    comp.save(path)
    loaded = xs.load_computation(path)
    shlo = loaded.as_stablehlo_text()
    assert 'mhlo.sharding = "{devices=[4,1]<=[4]}"' in shlo and 'mhlo.sharding = "{replicated}"' in shlo
    assert "sharding={devices=[4,1]<=[4]}" in loaded.as_hlo_text()
    cl = xs.client("cpu", num_devices=4)
    exe = xs.compile(loaded, cl.devices()[0], options=xs.CompileOptions(num_partitions=4))
    x = np.arange(128, dtype=np.float32).reshape(8, 16) / 100
    w = np.ones((16, 4), np.float32)
    out = exe.execute_sharded([x, w])
    assert out.sharding == "{devices=[4,1]<=[4]}" and out.shard_shape == (2, 4)
    np.testing.assert_allclose(out.to_numpy(), np.tanh((x @ w) * 0.5), rtol=1e-5)


def test_compile_checks_shardings_against_partitions() -> None:
    comp = _sharded_matmul()
    cl = xs.client("cpu", num_devices=8)
    with pytest.raises(xs.ShapeError, match=r"compile: 'sharded_mm': parameter 0 \('x'\): sharding "
                                            r"\{devices=\[4,1\]<=\[4\]\} tiles over 4 devices, but there are 8"):
        xs.compile(comp, cl.devices()[0], options=xs.CompileOptions(num_partitions=8))
    b = xs.XlaBuilder("far")
    x = ops.Parameter(b, 0, _f32(4), "x")
    with b.sharding(HloSharding.maximal(5)):
        y = ops.Neg(x)
    with pytest.raises(xs.ShapeError,
                       match=r"'far': the negate op of shape f32\[4\]: sharding \{maximal device=5\} names device 5"):
        xs.compile(b.build(y), cl.devices()[0], options=xs.CompileOptions(num_partitions=4))
    with pytest.raises(xs.CompileError, match=r"parameter 0 has the tiled sharding .* num_replicas=2"):
        xs.compile(comp, cl.devices()[0], options=xs.CompileOptions(num_replicas=2, num_partitions=4))
    # Without partitions XLA ignores shardings: the program runs on one device as before.
    out = xs.compile(comp, "cpu:0")(np.ones((8, 16), np.float32), np.ones((16, 4), np.float32))
    np.testing.assert_allclose(out.to_numpy(), np.tanh(np.full((8, 4), 8.0, np.float32)), rtol=1e-6)


def _args(*shapes: Any) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(1)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def test_xla_dump_of_a_shardy_partitioned_jax_program_runs() -> None:
    """JAX 0.10 partitions with Shardy: its dumps carry ``xla.sdy.*`` custom calls that XLA's GSPMD
    partitioner refuses. xlasdk compiles them (and its own GSPMD shardings) with Shardy."""
    comp = xs.load_computation(DATA / "module.before_optimizations.txt")
    cl = xs.client("cpu", num_devices=8)
    exe = xs.compile(comp, cl.devices()[0], options=xs.CompileOptions(num_partitions=8))
    io = np.load(DATA / "io.npz")
    outs = exe.execute_sharded([io["in0"], io["in1"], io["in2"]])
    info = json.loads((DATA / "shardings.json").read_text())
    for k, o in enumerate(outs):
        assert o.sharding == info["outputs"][k]
        np.testing.assert_allclose(o.to_numpy(), io[f"out{k}"], rtol=1e-6, atol=1e-6)


def test_partitioned_compile_keeps_xla_warnings_off_stderr() -> None:
    # Every partitioned compile made XLA log "Disabling Shardy and falling back to using GSPMD
    # propagation" and GSPMD's deprecation notice on the user's terminal.
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(repo)
    r = subprocess.run([sys.executable, str(repo / "examples" / "spmd_matmul.py")], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Shardy" not in r.stderr and "deprecated" not in r.stderr, r.stderr
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"  # asked for: XLA's log is all there
    r = subprocess.run([sys.executable, str(repo / "examples" / "spmd_matmul.py")], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0 and "GSPMD" in r.stderr, r.stderr[-2000:]


def test_module_spmd_counts_reads_the_mesh_form_of_jaxlib_012_dumps() -> None:
    """jaxlib 0.12's HLO writes shardings as {mesh['x'=4], [{'x'}, {}]}: a dimension split over an
    axis needs the mesh's devices, a replicated one none (what `xlasdk run` reads from a .hlo.pb,
    which has no HloModule header)."""
    from pathlib import Path

    import xlasdk as xs
    from xlasdk.sharding._spmd import module_spmd_counts

    assert xs.HloSharding.parse("{mesh['x'=4], [{'x'}, {}]}").num_devices == 4
    assert xs.HloSharding.parse("{mesh['x'=4], [{}, {}]}").is_replicated
    assert xs.HloSharding.parse("{mesh['x'=2,'y'=3], [{'y'}, {}]}").num_devices == 6
    pb = Path(__file__).parent / "data" / "dumps_jax012" / "sharded_mlp" / "module.before_optimizations.hlo.pb"
    assert module_spmd_counts(xs.load_computation(pb)) == (None, 4)
