"""Shardings and replica groups over a named mesh (issue 46): XLA's mesh notation (what jaxlib 0.12's dumps
write), Shardy's ``#sdy.sharding<@mesh, ...>``, and every notation of ``replica_groups=``; parsed, printed
back, and used (a per-partition program whose collectives are written in them runs on 4 devices).

Oracles: XLA's own GSPMD print of the same shardings (each expected string below is what jaxlib 0.12.1
printed for the program whose dump wrote the mesh form, ``lowered.as_text(dialect="hlo")``; the fresh
programs of tests/test_mesh_dumps.py check it again), and numpy's sums over the device groups."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from xlasdk.formats.hlo_rewrite import explicit_replica_groups
from xlasdk.sharding import parse_replica_groups

#: (mesh notation, what it means in XLA's tile-assignment notation)
MEANINGS = [
    ("{mesh['x'=4], [{'x'}, {}]}", "{devices=[4,1]<=[4]}"),
    ("{mesh['x'=4], [{}, {}]}", "{replicated}"),
    ("{mesh['data'=2,'model'=2], [{}, {'model'}]}", "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"),
    ("{mesh['data'=2,'model'=2], [{'model'}]}", "{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"),
    ("{mesh['data'=2,'model'=2], [{'data'}, {}]}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
    ("{mesh['data'=2,'model'=2], [{'data'}, {'model'}]}", "{devices=[2,2]<=[4]}"),
    ("{mesh['data'=2,'model'=2], [{'model'}, {'data'}]}", "{devices=[2,2]<=[2,2]T(1,0)}"),
    ("{mesh['data'=4,'model'=4], [{'model'}, {}]}", "{devices=[4,1,4]<=[4,4]T(1,0) last_tile_dim_replicate}"),
    ("{mesh['x'=2,'y'=2], [{'y', 'x'}]}", "{devices=[4]<=[2,2]T(1,0)}"),
    ("{mesh[x=4], [{x:(1)2}, {x:(2)2}]}", "{devices=[2,2]<=[4]}"),  # newer XLA: names without quotes
    ("{mesh['x'=8], [{'x':(2)4}]}", "{devices=[4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"),
    ("{mesh['x'=2,'y'=2], [{'x', ?}, {?}], replicated={'y'}}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
    ("{mesh['x'=2,'y'=2], [{}, {}], manual={'x'}}", "{devices=[1,1,2,2]<=[4] last_tile_dims={manual, replicated}}"),
    ("{mesh['x'=2,'y'=2], [{'y'}], unreduced={'x'}}", "{devices=[2,2]<=[2,2]T(1,0) last_tile_dims={unreduced}}"),
    ("{mesh['x'=2,'y'=2], device_ids=(3,1,2,0), [{'x'}, {}]}", "{devices=[2,1,2]3,1,2,0 last_tile_dim_replicate}"),
    ("{mesh['x'=2,'y'=2], device_ids=([2,2]T(1,0)), [{'x'}, {}]}", "{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}"),
    ("{mesh['x'=2,'y'=2], replicated}", "{replicated}"),
    ("{mesh['x'=2,'y'=2], manual}", "{manual}"),
    ("{mesh['x'=2,'y'=2], unreduced}", "{unreduced}"),
    ("{maximal_mesh[device_id=3]}", "{maximal device=3}"),
    ("{mesh['x'=4], [{'x'}], metadata={op_name=\"a\"}}", "{devices=[4]<=[4]}"),
    ("{{mesh['x'=4], [{'x'}]}, {replicated}, {devices=[2,2]<=[4] last_tile_dim_replicate}}",
     "{{devices=[4]<=[4]}, {replicated}, {devices=[2,2]<=[4] last_tile_dim_replicate}}"),
]

#: every notation of the tile-assignment form (V1 device lists, V2 iotas, subgroups, tuples)
OTHER_NOTATIONS = [
    "{replicated}", "{manual}", "{unknown}", "{unreduced}", "{maximal device=2}", "{devices=[2,2]0,1,2,3}",
    "{devices=[2,2]<=[2,2]T(1,0)}", "{devices=[2,1,2]3,2,1,0 last_tile_dim_replicate}",
    "{devices=[2,1,2]<=[4] last_tile_dims={manual}}", "{devices=[1,2,2,2]<=[8] last_tile_dims={manual, replicated}}",
    "{{replicated}, {devices=[2]0,1}, {maximal device=1}}", "{}", "{devices=[4]<=[4] shard_as 1}",
]


@pytest.mark.parametrize("text,meaning", MEANINGS)
def test_mesh_notation_means_xlas_tile_assignment_and_prints_back(text: str, meaning: str) -> None:
    s = xs.HloSharding.parse(text)
    assert s.to_hlo() == meaning
    assert s == xs.HloSharding.parse(meaning) and hash(s) == hash(xs.HloSharding.parse(meaning))
    again = xs.HloSharding.parse(s.to_hlo())
    assert again == s
    elements = s.tuple_elements or (s,)
    for e in elements:
        if e.mesh_sharding is None:
            continue
        printed = e.mesh_sharding.to_hlo()  # XLA's mesh notation, as jaxlib 0.12 writes it
        assert xs.HloSharding.parse(printed) == e
        assert xs.HloSharding.parse(printed).mesh_sharding == e.mesh_sharding
        if e.mesh_sharding.kind in ("tiled", "maximal") and not e.mesh_sharding.manual:
            sdy = e.mesh_sharding.to_sdy()  # Shardy's, with the mesh inline
            assert sdy.startswith("#sdy.sharding<mesh<") and xs.HloSharding.parse(sdy) == e


def test_the_printed_mesh_notation_is_xlas() -> None:
    text = "{mesh['data'=2,'model'=2], [{'model'}, {}], replicated={'data'}}"
    assert xs.HloSharding.parse(text).mesh_sharding.to_hlo() == text  # type: ignore[union-attr]
    bare = xs.HloSharding.parse("{mesh[x=4], [{x:(1)2, ?}]}").mesh_sharding
    assert bare is not None and bare.to_hlo() == "{mesh['x'=4], [{'x':(1)2, ?}]}"
    assert bare.to_sdy() == '#sdy.sharding<mesh<["x"=4]>, [{"x":(1)2, ?}]>'


@pytest.mark.parametrize("text", OTHER_NOTATIONS)
def test_other_notations_round_trip(text: str) -> None:
    s = xs.HloSharding.parse(text)
    assert xs.HloSharding.parse(s.to_hlo()) == s and s.mesh_sharding is None
    assert xs.HloSharding.from_op_sharding(s.to_op_sharding()) == s


def test_shardy_attributes_with_the_modules_meshes() -> None:
    """JAX's lowerings (and the ``xla.sdy.sharding`` frontend attributes of its HLO) name a mesh the
    module defines: ``comp.partitioning().meshes`` gives them."""
    comp = xs.load_computation(Path(__file__).parent / "data" / "dumps" / "sharded_mlp" / "lowered.mlir")
    part = comp.partitioning()
    shardings = [xs.HloSharding.parse(t, meshes=part.meshes) for t in part.parameter_shardings if t]
    assert [str(s) for s in shardings] == ["{devices=[4,1]<=[4]}", "{replicated}", "{replicated}"]
    assert shardings[0].mesh_sharding is not None and shardings[0].mesh_sharding.mesh_name == "mesh"
    assert shardings[0].mesh_sharding.to_sdy() == part.parameter_shardings[0]
    meshes = {"m": '#sdy.mesh<["a"=2, "b"=2], device_ids=[3, 2, 1, 0]>'}
    s = xs.HloSharding.parse('#sdy.sharding<@m, [{"b"}p0, {"a", ?}], replicated={}>', meshes=meshes)
    assert s == xs.HloSharding.parse("{devices=[2,2]3,1,2,0}")
    per_value = xs.HloSharding.parse('#sdy.sharding_per_value<[<@m, [{"a"}]>, <@m, []>]>', meshes=meshes)
    assert per_value == xs.HloSharding.parse("{{devices=[2,2]3,2,1,0 last_tile_dim_replicate}, {replicated}}")


@pytest.mark.parametrize("text,groups", [
    ("mesh['axis_0'=2,'axis_1'=2] {'axis_0'}", ((0, 2), (1, 3))),
    ("mesh['axis_0'=2,'axis_1'=2] {'axis_1'}", ((0, 1), (2, 3))),
    ("mesh['axis_0'=2,'axis_1'=1,'axis_2'=2] {'axis_0'}", ((0, 2), (1, 3))),
    ("mesh['axis_0'=4,'axis_1'=1] {'axis_0','axis_1'}", ((0, 1, 2, 3),)),
    ("mesh['a'=2,'b'=2] {'b','a'}", ((0, 2, 1, 3),)),  # the first axis named is the most major
    ("mesh['a'=4] {'a':(2)2}", ((0, 1), (2, 3))),
    ("mesh['a'=4] {}", ((0,), (1,), (2,), (3,))),
    ("mesh['axis_0'=1,'axis_1'=2,'axis_2'=2], device_ids=([2,2]T(1,0)) {'axis_1'}", ((0, 1), (2, 3))),
    ("mesh[x=2,y=2], device_ids=(3,1,2,0) {x}", ((3, 2), (1, 0))),
    ("[2,2]<=[4]", ((0, 1), (2, 3))),
    ("[2,2]<=[2,2]T(1,0)", ((0, 2), (1, 3))),
    ("[1,4]<=[4]", ((0, 1, 2, 3),)),
    ("{{0,1},{2,3}}", ((0, 1), (2, 3))),
    ("{}", ()),
    ("{{}}", ((),)),
])
def test_replica_groups_in_every_notation(text: str, groups: tuple[tuple[int, ...], ...]) -> None:
    assert parse_replica_groups(text) == groups


@pytest.mark.parametrize("text,words", [
    ("{mesh['x'=4], [{'y'}]}", "expected an axis of mesh['x'=4], got 'y'"),
    ("{mesh['x'=0], [{'x'}]}", "expected an axis size >= 1, got 0"),
    ("{mesh['x'=2,'x'=2], [{}]}", "axis 'x' appears twice in the mesh"),
    ("{mesh['x'=4], [{'x'}, {'x'}]}", "uses axis 'x' twice"),
    ("{mesh['x'=4], [{'x':(1)3}]}", "expected a sub-axis ':(pre)size' of axis 'x' (size 4)"),
    ("{mesh['x'=8], [{'x':(1)4}, {'x':(2)4}]}", "uses axis 'x':(2)4 twice"),
    ("{mesh['x'=4], [{?, 'x'}]}", "the open mark comes last"),
    ("{mesh['x'=4] [{'x'}]}", "expected ',', got '['"),
    ("{mesh['x'=4], bogus}", "expected '[' (one {axes} per dimension) or replicated/manual/unreduced after the mesh"),
    ("{mesh['x'=4], [{'x'}], bogus={'x'}}", "expected replicated=, unreduced=, manual= or metadata= (each once)"),
    ("{mesh['x'=4], [{'x'}], replicated={'x'}}", "uses axis 'x' twice"),
    ("{mesh['x'=4], device_ids=(0,1,2), [{'x'}]}", "expected device_ids to be a permutation of 0..3"),
    ("{mesh['x'=4], device_ids=([3]), [{'x'}]}", "expected device_ids=([dims]T(perm)) of 4 devices"),
    ("{mesh['x'=4], [{'x'}]", "expected '}', got the end of the text"),
    ("{mesh['x'4], [{'x'}]}", "expected '=', got '4'"),
    ("{maximal_mesh[device=3]}", "expected 'device_id=' in maximal_mesh[...]"),
    ('#sdy.sharding<@mesh, [{"x"}]>', "expected a mesh the module defines for @mesh (give meshes="),
    ('#sdy.sharding<mesh<["x"=4]>, [{"x"}], manual={"x"}>', "expected replicated= or unreduced= (each once)"),
    ('#sdy.sharded<@m, []>', "expected #sdy.sharding<...> or #sdy.sharding_per_value<[...]>"),
])
def test_a_malformed_mesh_sharding_is_a_shape_error_naming_what_was_expected(text: str, words: str) -> None:
    with pytest.raises(xs.ShapeError, match=re.escape(words)) as e:
        xs.HloSharding.parse(text)
    assert "HloSharding.parse" in str(e.value) and "column" in str(e.value)


@pytest.mark.parametrize("text,words", [
    ("mesh['a'=2] {'b'}", "expected an axis of mesh['a'=2], got 'b'"),
    ("mesh['a'=2] {'a','a'}", "name axis 'a' twice"),
    ("[2,2]<=[3]", "expected an iota [groups,size]<=[dims]T(perm) of as many devices as groups x size"),
    ("{{0,1},{2,x}}", "expected a number, got 'x'"),
    ("mesh['a'=4] {'a':(3)2}", "expected a sub-axis ':(pre)size' of axis 'a' (size 4)"),
])
def test_malformed_replica_groups_say_what_was_expected(text: str, words: str) -> None:
    with pytest.raises(xs.ShapeError, match=re.escape(words)) as e:
        parse_replica_groups(text)
    assert str(e.value).startswith("replica groups: ") and "mesh['x'=2,'y'=2] {'x'}" in str(e.value)


#: one partition's program of 4 (its entry named ``*_spmd``, as XLA's partitioner names it): a tuple
#: all-reduce over an iota's groups, a bitcast of one of its elements (``{1,0}`` f32[2,4] -> f32[8]), and
#: all-reduces over mesh axes (one of a mesh with device_ids)
PER_PARTITION = "".join([
    "HloModule per_partition, entry_computation_layout={(f32[2,4]{1,0}, f32[8]{0})->(f32[8]{0}, f32[2,4]{1,0})}, "
    "num_partitions=4\n",
    "\n",
    "%add (a: f32[], b: f32[]) -> f32[] {\n",
    "  %a = f32[] parameter(0)\n",
    "  %b = f32[] parameter(1)\n",
    "  ROOT %s = f32[] add(%a, %b)\n",
    "}\n",
    "\n",
    "ENTRY %main.1_spmd (p0: f32[2,4], p1: f32[8]) -> (f32[8], f32[2,4]) {\n",
    "  %p0 = f32[2,4]{1,0} parameter(0)\n",
    "  %p1 = f32[8]{0} parameter(1)\n",
    "  %ar = (f32[2,4]{1,0}, f32[8]{0}) all-reduce(%p0, %p1), channel_id=1, replica_groups=[2,2]<=[4], "
    "use_global_device_ids=true, to_apply=%add\n",
    "  %g0 = f32[2,4]{1,0} get-tuple-element(%ar), index=0\n",
    "  %g1 = f32[8]{0} get-tuple-element(%ar), index=1\n",
    "  %bc = f32[8]{0} bitcast(%g0)\n",
    "  %ar2 = f32[8]{0} all-reduce(%bc), channel_id=2, replica_groups=mesh['a'=2,'b'=2] {'a'}, "
    "use_global_device_ids=true, to_apply=%add\n",
    "  %sum = f32[8]{0} add(%ar2, %g1)\n",
    "  %ar3 = f32[2,4]{1,0} all-reduce(%g0), channel_id=3, replica_groups=mesh['a'=1,'b'=2,'c'=2], "
    "device_ids=([2,2]T(1,0)) {'b'}, use_global_device_ids=true, to_apply=%add\n",
    "  ROOT %t = (f32[8]{0}, f32[2,4]{1,0}) tuple(%sum, %ar3)\n",
    "}\n",
])


def test_a_tuple_all_reduce_with_a_bitcast_element_and_mesh_groups_runs() -> None:
    """It failed to compile: "layout minor_to_major field contains 2 elements, but shape has 1 dimensions:
    {1, 0}; shape: f32[8]" (jaxlib 0.10.2; 0.12: "Unexpected bitcast operation"). The loader's reading of the
    HLO stopped at the iota replica groups (``[2,2]<=[4]``), so the bitcast of the tuple all-reduce's element
    was left to XLA's importer, which keeps the operand's layout on it. Each partition's values: numpy's sums
    over the groups (small integers: every order of the sums gives the same bits)."""
    comp = xs.XlaComputation.from_hlo_text(PER_PARTITION)
    text = comp.as_stablehlo_text()
    assert "bitcast" not in text and "replica_group_mesh_axes" not in text
    exe = xs.compile(comp, xs.client("cpu", num_devices=4).devices()[0])  # 4 partitions: the module says so
    assert (exe.num_replicas, exe.num_partitions) == (1, 4)
    rng = np.random.default_rng(46)
    p0 = [rng.integers(-8, 8, (2, 4)).astype(np.float32) for _ in range(4)]
    p1 = [rng.integers(-8, 8, (8,)).astype(np.float32) for _ in range(4)]
    out = exe.execute_replicated([[p0[k], p1[k]] for k in range(4)])

    def over(groups: tuple[tuple[int, ...], ...], values: list[np.ndarray], k: int) -> np.ndarray:
        return sum((values[d] for g in groups if k in g for d in g), np.zeros_like(values[0]))

    pairs, columns = ((0, 1), (2, 3)), ((0, 2), (1, 3))
    g0 = [over(pairs, p0, d) for d in range(4)]
    for k in range(4):
        got = [np.asarray(o.to_numpy()) for o in out[k]]  # type: ignore[union-attr]
        np.testing.assert_array_equal(got[0], over(columns, [g.reshape(8) for g in g0], k) + over(pairs, p1, k))
        np.testing.assert_array_equal(got[1], over(pairs, g0, k))


def test_replica_groups_over_mesh_axes_are_written_out_for_the_import() -> None:
    text = explicit_replica_groups(PER_PARTITION)
    assert text is not None and "mesh[" not in text
    assert "replica_groups={{0,2},{1,3}}, use_global" in text and "replica_groups={{0,1},{2,3}}, use_global" in text
    assert explicit_replica_groups("HloModule m\n") is None
    bad = PER_PARTITION.replace("{'a'}, use_global", "{'z'}, use_global")
    with pytest.raises(xs.FormatError, match=re.escape("line 16: replica groups: expected an axis of")):
        explicit_replica_groups(bad)
    # XLA's parser of jaxlib 0.12 says it; that of 0.10.2 aborts (in the worker), and the pre-check says it
    with pytest.raises(xs.FormatError, match="line 16.*'z'"):
        xs.XlaComputation.from_hlo_text(bad)
