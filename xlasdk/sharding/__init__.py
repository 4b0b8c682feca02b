"""``HloSharding``: how a value is split over the devices of an SPMD program, in XLA's notation.

XLA writes shardings in HLO text as ``sharding={...}`` and StableHLO carries the same text in
``mhlo.sharding`` attributes (GSPMD). This module parses and prints that notation::

    {replicated}                                   every device holds the whole value
    {maximal device=1}                             only device 1 holds it
    {manual}                                       the program is already per device
    {devices=[2,2]0,1,2,3}                         2x2 tiles; tile (i, j) on device 2*i + j
    {devices=[4,1]<=[4]}                           the same device order written as an iota
    {devices=[2,2]<=[2,2]T(1,0)}                   iota reshaped to [2,2], transposed: 0,2,1,3
    {devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}   2 tiles, each held by 2 devices
    {devices=[2,1,2]0,1,2,3 last_tile_dims={manual}}   2 tiles, manual over the last axis
    {{replicated}, {devices=[2]0,1}}               a tuple: one sharding per element
    {mesh['x'=2,'y'=2], [{'x'}, {}]}               over a named mesh (jaxlib 0.12's dumps): dimension 0
                                                   split over axis x, replicated over y; the same as
                                                   {devices=[2,1,2]<=[4] last_tile_dim_replicate}
    #sdy.sharding<@mesh, [{"x"}, {}]>              Shardy's, over a mesh the module defines
                                                   (HloSharding.parse(text, meshes=comp.partitioning().meshes))

The tile assignment ``devices=[d0,d1,...]`` has one dimension per array dimension (the number of
tiles along it), plus trailing subgroup dimensions (``last_tile_dim_replicate`` or
``last_tile_dims={...}``) whose devices share a tile. Device numbers are *partition* numbers
(positions in ``CompileOptions.device_assignment``'s row), ``0 .. num_partitions - 1``.

Shardings are values: parsed and built ones compare equal when they place every tile on the
same devices (``{devices=[4]<=[4]}`` equals ``{devices=[4]0,1,2,3}``), and hash alike. One written
over a named mesh keeps that form (:attr:`HloSharding.mesh_sharding`, a :class:`MeshSharding` that
prints back in XLA's mesh notation or Shardy's); :func:`parse_replica_groups` reads a collective's
``replica_groups=`` in every notation (``{{0,1},{2,3}}``, ``[2,2]<=[4]``, ``mesh['x'=2,'y'=2] {'x'}``).

xlasdk writes and reads shardings in this (GSPMD) notation, and XLA partitions programs with its
Shardy partitioner: see :class:`HloSharding` for why. :class:`OpSharding` is the same sharding in
XLA's proto fields (``HloSharding.of(op)``, ``sharding.to_op_sharding()``); :mod:`xlasdk.attrs`
exports it too.
"""
from __future__ import annotations

from ._hlo_sharding import HloSharding, OpSharding, ShardingLike
from ._mesh import AxisRef, Mesh, MeshSharding
from ._parse import parse_replica_groups

__all__ = ["AxisRef", "HloSharding", "Mesh", "MeshSharding", "OpSharding", "ShardingLike", "parse_replica_groups"]
