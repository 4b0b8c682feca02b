"""A layered drawing of a directed acyclic graph (the instructions of a program), for reports.

A plain function of the edges: no xlasdk types, no drawing. Nodes are ``0..n-1`` in a
topological order (every edge goes from a lower to a higher number), as
:meth:`XlaComputation.instructions <xlasdk.XlaComputation.instructions>` lists them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

__all__ = ["layered_layout"]


def layered_layout(n: int, edges: Sequence[tuple[int, int]], *, pinned: Collection[int] = (),
                   sweeps: int = 4) -> tuple[list[int], list[int]]:
    """The layer (row) and the position in its layer (column) of each node of a DAG.

    A node's layer is at least one past its deepest predecessor's (the longest path from a
    source), and as late as that allows: in the layer just above its first user, so that a value
    (a constant, a broadcast of a parameter) is drawn next to where it is used; the ``pinned``
    nodes (a program's parameters) stay in layer 0. Within a layer, nodes are ordered
    by the barycenter heuristic (mean column of their neighbours, sweeping down then up
    ``sweeps`` times; layers are drawn centred), which keeps edges short and crossings few; it is
    not optimal.

    Parameters
    ----------
    n
        Number of nodes.
    edges
        ``(source, target)`` pairs with ``source < target`` (topological numbering).
    pinned
        Sources that stay in layer 0 (a program's parameters).
    sweeps
        Rounds of reordering.

    Returns
    -------
    ``(layer, column)``: two lists of ``n`` ints; the nodes of one layer have distinct columns
    ``0..k-1``.

    Raises
    ------
    ValueError
        An edge that does not go from a lower to a higher node number in ``0..n-1``.
    """
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for s, t in edges:
        if not 0 <= s < t < n:
            raise ValueError(f"layered_layout: edge ({s}, {t}) does not go forward in 0..{n - 1}")
        preds[t].append(s)
        succs[s].append(t)
    layer = [0] * n
    for v in range(n):
        if preds[v]:
            layer[v] = 1 + max(layer[u] for u in preds[v])
    keep = set(pinned)
    for v in reversed(range(n)):  # as late as possible: just above the first user (numbered after it)
        if succs[v] and v not in keep:
            layer[v] = max(layer[v], min(layer[w] for w in succs[v]) - 1)
    rows: dict[int, list[int]] = {}
    for v in range(n):
        rows.setdefault(layer[v], []).append(v)
    order = [rows[k] for k in sorted(rows)]
    col = [0] * n
    pos = [0.0] * n  # the column, centred on the layer (layers are drawn centred)

    def place(row: list[int]) -> list[int]:
        for i, v in enumerate(row):
            col[v] = i
            pos[v] = i - (len(row) - 1) / 2
        return row

    order = [place(row) for row in order]

    def reorder(row: list[int], nbrs: list[list[int]]) -> list[int]:
        def key(v: int) -> tuple[float, int]:
            ns = nbrs[v]
            return (sum(pos[u] for u in ns) / len(ns) if ns else pos[v], col[v])

        return place(sorted(row, key=key))

    for _ in range(sweeps):
        order = [reorder(row, preds) for row in order]
        order = [reorder(row, succs) for row in reversed(order)][::-1]
    return layer, col
