"""The page of a bisection (:func:`html_report`, ``xlasdk compare --bisect ops --html``): the
program's graph colored by each instruction's error, the culprit and its path, as one HTML file."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._graph_layout import layered_layout
from ..errors import XlaSdkError
from ..program.walk import closure
from ._bisect_core import ERROR_CLASSES, OpError

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ..program.graph_import import Instruction

__all__ = ["ERROR_COLORS", "html_report"]


# -- a page people read ------------------------------------------------------------------------------------------
#: Fill of each error class in the report's graph (and its legend).
ERROR_COLORS = {"exact": "#a8dca0", "rounding": "#e8ec9a", "diverges": "#f08c8c", "unmeasured": "#dddddd"}
_CSS = ("""body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;font-family:monospace}th{background:#eee}
.bad{background:#fdd}.ok{background:#dfd}.culprit{background:#f88;font-weight:bold}.carries{background:#fec}
.nonfinite{background:#caf}pre{background:#f6f6f6;padding:8px;white-space:pre-wrap}
.graph{overflow:auto;border:1px solid #ccc;max-height:80vh}.legend svg{vertical-align:middle}
.legend span{margin-right:1.5em}.op rect{stroke:#777;stroke-width:1}.op text{font:11px monospace;fill:#222}
.op text.sub{fill:#555}.op.output rect{stroke:#000;stroke-width:2}.op.path rect{stroke:#c00;stroke-width:3}
.op.first rect{stroke:#000;stroke-width:5}.op.nonfinite-first rect{stroke:#70c;stroke-width:4}
.op:target rect{stroke:#06f;stroke-width:6}.edge{fill:none;stroke:#aaa;stroke-width:1}
.edge.path{stroke:#c00;stroke-width:3}"""
        + "".join(f"\n.op.err-{k} rect{{fill:{c}}}" for k, c in ERROR_COLORS.items()))
_NODE_W, _NODE_H, _GAP_X, _GAP_Y, _MARGIN = 168, 36, 22, 46, 16


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "\u2026"


def _values(report: Any, row: Callable[..., str]) -> list[str]:
    """The per-value summaries (each side's min, max, mean and CRC-32) and the score histogram."""
    from ._summaries import histogram_line

    out = ["<h2>Values</h2><table>", row(["output", "side", "min", "max", "mean", "crc32", "NaN/Inf"], tag="th")]
    for o in report.outputs:
        for side, s in zip(("device", "expected"), o.summaries(), strict=True):
            if s is not None:
                out.append(row([o.index, side, f"{s.min:.6g}", f"{s.max:.6g}", f"{s.mean:.6g}", s.checksum,
                                s.nonfinite]))
    out.append("</table>")
    hist = report.score_histogram()
    out.append("<p>Scores (largest error over largest magnitude): outputs: "
               f"{_esc(histogram_line(hist['outputs']))}"
               + (f"; op by op: {_esc(histogram_line(hist['op_by_op']))}" if "op_by_op" in hist else "") + "</p>")
    return out


def _esc(text: str) -> str:
    from html import escape

    return escape(text)


def html_report(comp: XlaComputation, report: Any) -> str:
    """``report`` (a :class:`~xlasdk.CompareReport` of ``comp``) as a self-contained HTML page.

    The page holds the outputs' errors, each compared value's summary (min, max, mean, CRC-32) and
    the score histogram, the bisections' text, and the program's graph drawn as
    inline SVG: one box per instruction (:meth:`XlaComputation.instructions`, layered top to
    bottom in dataflow order, edges from operands to users), filled by its error class against the
    reference (:data:`ERROR_COLORS`: ``exact``, ``rounding``, ``diverges``; ``unmeasured`` when
    ``report.bisect_ops`` holds no :attr:`OpsBisection.op_errors`, e.g. without ``bisect="ops"``
    or when the outputs match). The first divergent instruction (the culprit, or where the values
    first depart when nobody is blamed) has a thick black outline (class ``first``), the
    instructions and edges that carry its value to an output a red one (class ``path``), the
    outputs a black one (class ``output``), the first NaN/Inf a purple one. A table lists every
    instruction with the same marks and its error. Each box is an element ``g`` with
    ``id="op-<name>"``, ``data-name``, ``data-opcode`` and ``data-error`` (its class).

    No scripts and nothing fetched: a Content-Security-Policy of ``default-src 'none'`` (inline
    styles only) makes a browser refuse anything else. Size: about 1 kB per instruction.

    Raises
    ------
    XlaSdkError
        ``comp`` cannot be walked (see :meth:`XlaComputation.instructions`).
    """
    from html import escape

    def row(cells: Sequence[Any], cls: str = "", tag: str = "td") -> str:
        attr = f' class="{cls}"' if cls else ""
        return f"<tr{attr}>" + "".join(f"<{tag}>{c if isinstance(c, _Html) else escape(str(c))}</{tag}>"
                                       for c in cells) + "</tr>"

    from ._orders import verdict

    status = verdict(report)
    parts = ["<!DOCTYPE html><html><head><meta charset=\"utf-8\">"
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
             f"<title>{escape(report.name)}: {status}</title><style>{_CSS}</style></head><body>",
             f"<h1>{escape(report.name)}: device vs {escape(report.against)}: "
             f"<span class=\"{'ok' if report.ok else 'bad'}\">{status}</span></h1>",
             "<h2>Outputs</h2><table>",
             row(["output", "shape", "dtype", "max abs", "max rel", "max ulp", "mismatches", "first"], tag="th")]
    for o in report.outputs:
        parts.append(row([o.index, list(o.shape), o.dtype, f"{o.max_abs:.3g}", f"{o.max_rel:.3g}", f"{o.max_ulp:.3g}",
                          o.mismatches, "" if o.first_mismatch is None else list(o.first_mismatch)],
                         "ok" if o.ok else "bad"))
    parts.append("</table>")
    parts.extend(_values(report, row))
    for title, part in (("Bisection to the op", report.bisect_ops), ("Bisection to the pass", report.bisect_passes),
                        ("First NaN/Inf", report.nonfinite)):
        if part is not None:
            parts.append(f"<h2>{title}</h2><pre>{escape(str(part))}</pre>")
    bo = report.bisect_ops
    culprit = bo.culprit.name if bo is not None and bo.culprit else None
    first = culprit or (bo.first_divergent if bo is not None else "") or None
    errors: dict[str, OpError] = dict(bo.op_errors) if bo is not None else {}
    group = set(bo.group) if bo is not None else set()
    nonfinite = report.nonfinite.culprit.name if report.nonfinite is not None and report.nonfinite.culprit else None
    instrs = comp.instructions()
    graph = comp.instruction_graph()
    outputs: dict[str, list[int]] = {}
    for k, o in enumerate(graph.outputs):
        try:
            outputs.setdefault(graph.instruction_of(o).name, []).append(k)
        except XlaSdkError:
            continue

    def reach(start: str, step: Callable[[Instruction], Sequence[Instruction]]) -> set[str]:
        """The names of the instructions ``start`` reaches through ``step`` (itself left out)."""
        return {i.name for i in closure(step(comp.instruction(start)), step)}

    carries = reach(culprit, lambda i: i.users) if culprit is not None else set()
    path: set[str] = set()
    if first is not None:  # from the first divergent op to the outputs its value reaches
        feeds_outputs = set(outputs).union(*(reach(n, lambda i: i.operands) for n in outputs))
        path = ({first} | reach(first, lambda i: i.users)) & feeds_outputs

    # the graph
    pos = {ins.name: k for k, ins in enumerate(instrs)}
    edges = sorted({(pos[o.name], pos[ins.name]) for ins in instrs for o in ins.operands})
    layer, col = layered_layout(len(instrs), edges, pinned=[k for k, i in enumerate(instrs) if i.opcode == "parameter"])
    widths: dict[int, int] = {}
    for v in range(len(instrs)):
        widths[layer[v]] = widths.get(layer[v], 0) + 1
    wide = max(widths.values(), default=1)
    xs_ = [_MARGIN + (col[v] + (wide - widths[layer[v]]) / 2) * (_NODE_W + _GAP_X) for v in range(len(instrs))]
    ys = [_MARGIN + layer[v] * (_NODE_H + _GAP_Y) for v in range(len(instrs))]
    width = 2 * _MARGIN + wide * (_NODE_W + _GAP_X) - _GAP_X
    height = 2 * _MARGIN + (max(layer, default=0) + 1) * (_NODE_H + _GAP_Y) - _GAP_Y
    svg = [f'<svg class="program" width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
           f'role="img" aria-label="the graph of {escape(report.name)}">']
    for s_, t_ in edges:
        a, b = instrs[s_].name, instrs[t_].name
        x1, y1, x2, y2 = xs_[s_] + _NODE_W / 2, ys[s_] + _NODE_H, xs_[t_] + _NODE_W / 2, ys[t_]
        dy = (y2 - y1) / 2
        cls = "edge path" if a in path and b in path else "edge"
        svg.append(f'<path class="{cls}" data-from="{escape(a)}" data-to="{escape(b)}" '
                   f'd="M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + dy:.1f} {x2:.1f},{y2 - dy:.1f} {x2:.1f},{y2:.1f}"/>')
    for v, ins in enumerate(instrs):
        err = errors.get(ins.name)
        kind = err.kind if err is not None else "unmeasured"
        marks = [f"err-{kind}"] + [m for m, on in (("first", ins.name == first), ("path", ins.name in path),
                                                   ("output", ins.name in outputs),
                                                   ("nonfinite-first", ins.name == nonfinite)) if on]
        tip = [f"{ins.name} = {ins.opcode} {ins.shape}", f"error against the reference: {kind}"]
        if err is not None and kind != "exact":
            tip.append(f"max abs {err.max_abs:.3g}, max rel {err.max_rel:.3g}, max ulp {err.max_ulp:.3g}, "
                       f"{err.mismatches} mismatches")
        if ins.name == first:
            tip.append("the first divergent instruction" + (" (introduces the divergence)" if ins.name == culprit
                                                             else " (values first depart here; not blamed)"))
        if ins.name in outputs:
            tip.append(f"output {', '.join(str(k) for k in outputs[ins.name])}")
        md = ins.metadata
        if md.source_file:
            tip.append(f"at {md.source_file}:{md.source_line}")
        x, y = xs_[v], ys[v]
        sub = ins.opcode.removeprefix("stablehlo.") + " " + str(ins.shape)
        svg.append(f'<g class="op {" ".join(marks)}" id="op-{escape(ins.name)}" data-name="{escape(ins.name)}" '
                   f'data-opcode="{escape(ins.opcode)}" data-error="{kind}"><title>{escape(chr(10).join(tip))}</title>'
                   f'<rect x="{x:.1f}" y="{y:.1f}" width="{_NODE_W}" height="{_NODE_H}" rx="4"/>'
                   f'<text x="{x + 6:.1f}" y="{y + 14:.1f}">{escape(_short(ins.name, 24))}</text>'
                   f'<text class="sub" x="{x + 6:.1f}" y="{y + 29:.1f}">{escape(_short(sub, 25))}</text></g>')
    svg.append("</svg>")

    def swatch(cls: str) -> str:
        return f'<svg width="22" height="16"><g class="op {cls}"><rect x="2" y="2" width="18" height="12"/></g></svg>'

    legend = [f'<span data-class="{k}">{swatch("err-" + k)} {k}</span>' for k in ERROR_CLASSES]
    legend += [f'<span data-mark="{m}">{swatch("err-unmeasured " + m)} {what}</span>' for m, what in (
        ("first", "the first divergent instruction"), ("path", "carries its value to an output"),
        ("output", "an output"), ("nonfinite-first", "the first NaN/Inf"))]
    how = ("each instruction's device value (one compile with every value exposed) against its reference value, "
           "both from the program's arguments, with the comparison's tolerance" if errors else
           "no per-instruction errors were measured (they come with bisect=\"ops\" / --bisect ops on a divergence)")
    parts.append(f"<h2>Graph</h2><p class=\"legend\">{' '.join(legend)}</p><p>Colors: {how}.</p>"
                 f"<div class=\"graph\">{''.join(svg)}</div>")
    parts.append("<h2>Instructions</h2><p>"
                 "<span class=\"culprit\">introduces the divergence</span> "
                 "<span class=\"carries\">carries it (reads its value)</span> "
                 "<span class=\"nonfinite\">first NaN/Inf</span></p><table>")
    parts.append(row(["#", "name", "opcode", "shape", "operands", "source", "error"], tag="th"))
    for ins in instrs:
        md = ins.metadata
        cls = ("culprit" if ins.name == culprit else "nonfinite" if ins.name == nonfinite else
               "carries" if ins.name in carries or ins.name in group else "")
        err = errors.get(ins.name)
        etext = ("" if err is None else err.kind if err.kind == "exact" else
                 f"{err.kind}: max rel {err.max_rel:.3g}, max ulp {err.max_ulp:.3g}")
        link = _Html(f'<a href="#op-{escape(ins.name)}">{escape(ins.name)}</a>')
        parts.append(row([ins.index, link, ins.opcode, ins.shape, ", ".join(o.name for o in ins.operands),
                          f"{md.source_file}:{md.source_line}" if md.source_file else "", etext], cls))
    parts.append("</table></body></html>\n")
    return "\n".join(parts)


class _Html(str):
    """Text that is already HTML (not escaped again)."""
