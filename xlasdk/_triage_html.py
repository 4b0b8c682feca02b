"""The page of a triage (:meth:`xlasdk.TriageReport.html`, ``xlasdk triage --html``): one HTML file
with no script and nothing fetched, every text from the modules and from XLA escaped."""

from __future__ import annotations

import html
import os
import urllib.parse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._triage import TriageReport

__all__ = ["triage_html"]

_CSS = """body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}th{background:#eee}
td.sig,pre{font-family:monospace;white-space:pre-wrap;word-break:break-word}td.sig{max-width:60em}
pre{background:#f6f6f6;padding:8px;margin:4px 0}.flaky{background:#fec;font-weight:bold}
.num{text-align:right}"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _href(target: str, page_dir: str | None) -> str:
    """A link to the file ``target``: relative to the page's directory when it has one (the page and
    the files move together), else a ``file:`` URI; quoted, then escaped."""
    if page_dir is not None:
        try:
            rel = os.path.relpath(os.path.abspath(target), page_dir)
        except ValueError:  # another drive
            rel = None
        if rel is not None:
            return _e(urllib.parse.quote(rel.replace(os.sep, "/")))
    return _e("file://" + urllib.parse.quote(os.path.abspath(target).replace(os.sep, "/")))


def triage_html(report: TriageReport, page_path: str | None = None) -> str:
    """The report as a self-contained page: a summary, then one row per group (its signature whole,
    count, last pass, flaky mark, example, small repro linked when there is one), each group's files
    and XLA's message, and the modules that compiled. ``page_path``: where the page will be written
    (links to the repros are made relative to its directory)."""
    page_dir = None if page_path is None else os.path.dirname(os.path.abspath(page_path))
    failing = sum(g.count for g in report.groups)
    total = failing + len(report.compiled)
    out = ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\"><title>xlasdk triage</title>",
           f"<style>{_CSS}</style></head><body>", "<h1>xlasdk triage</h1>",
           f"<p>{failing} of {total} modules failed on {_e(report.device)} in {len(report.groups)} "
           f"group{'s' if len(report.groups) != 1 else ''}; {len(report.compiled)} compiled"
           f"{_e(f' (each compiled {report.repeat} times)') if report.repeat > 1 else ''}.</p>"]
    if report.groups:
        out.append("<table><tr><th>group</th><th>signature</th><th>count</th><th>last pass</th><th>flaky</th>"
                   "<th>example</th><th>small repro</th></tr>")
        for k, g in enumerate(report.groups, 1):
            if g.repro is not None:
                repro = (f"<a href=\"{_href(g.repro, page_dir)}\">{_e(os.path.basename(g.repro))}</a> "
                         f"({_e(g.repro_instructions)} instructions)")
            elif g.repro_note is not None:
                repro = f"none: {_e(g.repro_note)}"
            else:
                repro = "-"
            flaky = "<td class=\"flaky\">flaky</td>" if g.flaky else "<td></td>"
            out.append(f"<tr id=\"group-{k}\"><td class=\"num\"><a href=\"#details-{k}\">{k}</a></td>"
                       f"<td class=\"sig\">{_e(g.signature)}</td><td class=\"num\">{g.count}</td>"
                       f"<td>{_e(g.last_pass or '-')}</td>{flaky}<td>{_e(g.example)}</td><td>{repro}</td></tr>")
        out.append("</table>")
        for k, g in enumerate(report.groups, 1):
            out.append(f"<h2 id=\"details-{k}\">group {k}: {g.count} module{'s' if g.count != 1 else ''}</h2>")
            out.append(f"<pre>{_e(g.signature)}</pre>")
            out.append("<p>XLA's message (the example's):</p>")
            out.append(f"<pre>{_e(g.message)}</pre>")
            out.append("<ul>" + "".join(f"<li>{_e(f)}</li>" for f in g.files) + "</ul>")
    if report.compiled:
        out.append("<h2>compiled</h2><ul>" + "".join(f"<li>{_e(f)}</li>" for f in report.compiled) + "</ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
