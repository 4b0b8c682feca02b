"""Many modules that make XLA fail, grouped by how they fail (:func:`triage`, ``xlasdk triage``).

Each module is loaded (XLA's loader runs in xlasdk's worker process first, as every file's load
does) and compiled in the worker (for the CPU, or for a TPU topology without a chip), ``repeat``
times. A failure's *signature* (:mod:`xlasdk._failure_signature`) is the check's location when XLA
aborts (``abort at algebraic_simplifier.cc:586``: its ``F0000 ... file.cc:NNN]`` / ``Check failed``
line), else the status code and the message with what is particular to one module blanked
(element types and XLA's words kept), with the failing instruction's opcode where XLA names one; a
failure while loading is marked ``loading:``. Modules are grouped by their failure's signature, and for each
failing module the compile is made once more with XLA's per-pass dump
(``--xla_dump_hlo_pass_re=.*`` into a temporary directory) to name the last HLO pass XLA entered
(the ``before_PASS`` of its last dump file), which the group shows when its modules agree.

A module whose compiles do not all end the same way (a crash one time, a success or another
signature the next) is *flaky*; its group is marked flaky. A module that compiled every time is in
no group (:attr:`TriageReport.compiled`).
"""

from __future__ import annotations

import html
import os
import re
import shutil
import tempfile
import urllib.parse
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ._failure_signature import signature
from ._jaxlib import isolated
from ._where import where
from .errors import XlaSdkError

__all__ = ["Attempt", "TriageGroup", "TriageReport", "triage"]

#: the suffixes of the module files a directory is searched for
MODULE_SUFFIXES: Final = (".hlo", ".txt", ".mlir", ".mlirbc", ".pb", ".stablehlo")
_INSTANCE: Final = re.compile(r"-\d+$")  # a pass's instance number
_DUMP: Final = re.compile(r"^module_(\d+)\..*\.(\d{4})\.([\w-]+)\.after_[\w-]+\.before_([\w-]+)\.txt$")


@dataclass(frozen=True)
class Attempt:
    """One load and compile of one module: ``signature`` None when it compiled."""

    signature: str | None
    message: str


@dataclass
class TriageGroup:
    """Modules that fail the same way.

    Attributes
    ----------
    signature: the failure's signature (``abort at FILE:LINE``, ``CODE at FILE:LINE`` for a
        RET_CHECK, ``CODE: normalised message``; the failing instruction's opcode in parentheses
        after the head where XLA names one; ``loading: ...`` when the load failed).
    files: the modules, in the order given; example: the first of them.
    message: the example's message (XLA's, with its names).
    last_pass: the last HLO pass XLA entered compiling them (``pipeline/pass``) where XLA's dump
        says it and every module of the group that says one says the same; else None.
    flaky: some module of the group did not fail this way on every compile.
    """

    signature: str
    files: list[str]
    message: str
    last_pass: str | None = None
    flaky: bool = False
    #: the example shrunk by the reducer (``triage(..., repro_dir=DIR)``): the HLO file written, its
    #: instruction count, or why there is none (``repro_note``)
    repro: str | None = None
    repro_instructions: int | None = None
    repro_note: str | None = None

    @property
    def count(self) -> int:
        return len(self.files)

    @property
    def example(self) -> str:
        return self.files[0]


@dataclass
class TriageReport:
    """What :func:`triage` found: the failure groups (most modules first), the modules that
    compiled every time, the device and the number of compiles per module."""

    groups: list[TriageGroup]
    compiled: list[str]
    device: str
    repeat: int
    attempts: dict[str, list[Attempt]] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values."""
        return {
            "device": self.device, "repeat": self.repeat, "modules": len(self.compiled) + sum(
                g.count for g in self.groups),
            "compiled": list(self.compiled),
            "groups": [{"signature": g.signature, "count": g.count, "example": g.example, "files": list(g.files),
                        "message": g.message, "last_pass": g.last_pass, "flaky": g.flaky, "repro": g.repro,
                        "repro_instructions": g.repro_instructions, "repro_note": g.repro_note}
                       for g in self.groups],
        }

    def table(self) -> str:
        """A text table: per group its number, count, flaky mark, last pass and example file, then its
        signature whole on the lines below (wrapped at 100 characters, never cut)."""
        import textwrap

        rows = [("group", "count", "flaky", "last pass", "example")]
        rows += [(str(k), str(g.count), "flaky" if g.flaky else "", g.last_pass or "-", g.example)
                 for k, g in enumerate(self.groups, 1)]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = []
        for i, r in enumerate(rows):
            lines.append("  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4])
            if i > 0:
                g = self.groups[i - 1]
                lines += ["    " + part for part in textwrap.wrap(g.signature, 100, break_long_words=False,
                                                                   break_on_hyphens=False)]
        for k, g in enumerate(self.groups):
            if g.repro is not None:
                lines.append(f"group {k + 1}: small repro {g.repro} ({g.repro_instructions} instructions)")
            elif g.repro_note is not None:
                lines.append(f"group {k + 1}: no small repro: {g.repro_note}")
        failing = sum(g.count for g in self.groups)
        lines.append(f"{failing} of {failing + len(self.compiled)} modules failed on {self.device} in "
                     f"{len(self.groups)} group{'s' if len(self.groups) != 1 else ''}; {len(self.compiled)} compiled"
                     f"{f' (each compiled {self.repeat} times)' if self.repeat > 1 else ''}")
        return "\n".join(line.rstrip() for line in lines)

    def html(self, page_path: str | os.PathLike[str] | None = None) -> str:
        """The report as a self-contained HTML page (no script, nothing fetched, every text
        escaped): groups, counts, signatures whole, last pass, flaky mark, files, XLA's message, one
        small repro per group linked (relative to ``page_path``'s directory, where the page goes)."""
        return triage_html(self, None if page_path is None else os.fspath(page_path))

    def __str__(self) -> str:
        return self.table()


# -- the worker side -------------------------------------------------------------------------------
def _compile_in_worker(mtext: str, name: str, topology: str | None,
                       overrides: tuple[tuple[str, str | bool | int | float], ...]) -> None:
    """Compile ``mtext`` for the CPU or for one device of ``topology`` with the debug options
    ``overrides`` (runs in the worker process)."""
    if topology is None:
        from .runtime.isolated_compile import compile_in_worker

        compile_in_worker(mtext, 1, 1, overrides, name)
        return
    from ._jaxlib.mlir import without_copies
    from .runtime.topology import compile_for_topology_in_worker

    if "mhlo.copy" in mtext:
        mtext = without_copies(mtext)
    compile_for_topology_in_worker(mtext, topology, [0], 1, 1, overrides, name)


# -- one module ------------------------------------------------------------------------------------
def _attempt(path: str, topology: str | None, timeout: float,
             overrides: tuple[tuple[str, str | bool | int | float], ...] = ()) -> Attempt:
    from .formats.load import load_computation

    try:
        comp = load_computation(path)  # XLA's loader runs in the worker first
    except XlaSdkError as e:
        msg = str(e).split(" — at ")[0]
        died = "XLA aborted" in msg or "died" in msg
        msg = msg.replace(path, "FILE")
        return Attempt(f"loading: {signature(msg, died=died)}", msg)
    if topology is not None:  # as xs.compile for a TPU: jaxlib's LAPACK calls become the TPU's own first
        from .errors import PlatformLoweringError
        from .runtime._platform_lowering import for_platform

        try:
            comp = for_platform(comp, "tpu")
        except PlatformLoweringError as e:
            msg = str(e).split(" — at ")[0]
            return Attempt(signature(msg, died=False), msg)
    try:
        isolated.request("xlasdk._triage:_compile_in_worker", comp.as_stablehlo_text(), comp.name, topology,
                         overrides, timeout=timeout)
    except isolated.Failed as e:
        return Attempt(signature(e.message, died=False), e.message)
    except isolated.WorkerDied as e:
        if e.timed_out:
            return Attempt(f"timeout: the compile ran past {timeout:g} s", e.reason)
        if e.killed:
            raise XlaSdkError(f"triage: {path}: the worker was killed or could not run ({e.reason}); "
                              f"nothing can be said of this module{where()}") from None
        return Attempt(signature(e.reason, died=True), e.reason)
    return Attempt(None, "compiled")


def last_pass(dump_dir: str) -> str | None:
    """``pipeline/pass`` of the last ``...NNNN.PIPELINE.after_X.before_PASS.txt`` file XLA's
    per-pass dump wrote in ``dump_dir`` (the pass it entered last), None when there is none."""
    best: tuple[int, int, str] | None = None
    try:
        names = os.listdir(dump_dir)
    except OSError:
        return None
    for n in names:
        m = _DUMP.match(n)
        if m is not None:
            # a pass run more than once carries its instance number (apply-xla-transforms-7): which
            # instance depends on what else the process compiled, so the group names the pass alone
            key = (int(m.group(1)), int(m.group(2)), f"{m.group(3)}/{_INSTANCE.sub('', m.group(4))}")
            if best is None or key > best:
                best = key
    return None if best is None else best[2]


def _last_pass_of(path: str, topology: str | None, timeout: float) -> str | None:
    tmp = tempfile.mkdtemp(prefix="xlasdk-triage-dump-")
    try:
        _attempt(path, topology, timeout, (("xla_dump_to", tmp), ("xla_dump_hlo_pass_re", ".*")))
        return last_pass(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- the entry point -------------------------------------------------------------------------------
#: the parts of the names of the reports XLA writes beside a dump's modules (``--xla_dump_to``):
#: text files that are not modules (``module_0001.jit_f.cpu_after_optimizations-buffer-assignment.txt``)
XLA_REPORT_FILES: tuple[str, ...] = ("-buffer-assignment", "-memory-usage-report", "-live-range",
                                      "buffer-assignment-values", "-thunk-sequence",
                                      # and XLA:TPU's (``module_0001.jit_f.cl_123.tpu_comp_env.txt``)
                                      ".tpu_comp_env.", ".target_arguments.", ".execution_options.",
                                      ".hlo_module_config.", ".basic_compiler_metadata.", ".transfer_stats.")


def module_files(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    """The module files of ``paths``: a file as it is, a directory's files whose names end in one
    of :data:`MODULE_SUFFIXES` (recursively, sorted), but for XLA's reports beside a dump's modules
    (:data:`XLA_REPORT_FILES`) and its ``.debug_options``.

    Raises
    ------
    XlaSdkError
        A path that does not exist or is neither a file nor a directory, a directory that holds no
        module file, no path at all.
    """
    if isinstance(paths, (str, os.PathLike)) or not paths:
        raise XlaSdkError(f"triage: expected a list of module files or directories, got {paths!r}{where()}")
    out: list[str] = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            found = sorted(os.path.join(d, n) for d, _, names in os.walk(p) for n in names
                           if n.endswith(MODULE_SUFFIXES) and not n.endswith(".debug_options")
                           and not any(r in n for r in XLA_REPORT_FILES))
            if not found:
                raise XlaSdkError(f"triage: {p}: a directory with no module file (expected names ending in "
                                  f"{', '.join(MODULE_SUFFIXES)}){where()}")
            out += found
        elif os.path.isfile(p):
            out.append(p)
        elif os.path.lexists(p):
            raise XlaSdkError(f"triage: {p}: expected a module file or a directory, got neither{where()}")
        else:
            raise XlaSdkError(f"triage: {p}: no such file or directory{where()}")
    return out


def triage(paths: Sequence[str | os.PathLike[str]], *, device: Any = None, repeat: int = 1,
           timeout: float = 300.0, progress: Callable[[str, list[Attempt]], None] | None = None,
           repro_dir: str | os.PathLike[str] | None = None, repro_time: float = 120.0) -> TriageReport:
    """Load and compile each module ``repeat`` times in xlasdk's worker and group the failures.

    Parameters
    ----------
    paths: module files (any format ``xs.load_computation`` reads) and directories (their module
        files, recursively: :func:`module_files`).
    device: what to compile for: a CPU device (default) or a TPU topology's device
        (``xs.topology("v5e:1x1").devices[0]``, no chip needed; a chip's device compiles for its
        slice's topology).
    repeat: compiles per module (>= 1); a module whose compiles end differently is flaky.
    timeout: seconds one compile may take (past it: a ``timeout:`` failure).
    progress: called with each module's path and its attempts as it is done.
    repro_dir: where to write one small repro per group (``group_K.hlo``): the group's example shrunk
        by :func:`xlasdk.reduce` (``"crash"`` for an abort, else ``"compile-error"``; a candidate is kept
        only when it fails with the group's signature), within ``repro_time`` seconds each. Groups
        of load failures and timeouts get none (the note says why).

    Returns
    -------
    :class:`TriageReport`: groups by signature (most modules first), the modules that compiled.

    Raises
    ------
    XlaSdkError
        Bad paths (:func:`module_files`), a ``repeat`` that is not an integer >= 1, a device the
        worker cannot compile for, a worker that could not run.
    """
    from ._numbers import COUNT, SECONDS
    from .reducer import _topology_of

    repeat = COUNT.check(repeat, "triage: repeat")
    timeout = SECONDS.check(timeout, "triage: timeout")
    files = module_files(paths)
    try:
        topology = None if device is None else _topology_of(device)
    except XlaSdkError as e:
        raise XlaSdkError(str(e).split(" — at ")[0].replace("reduce:", "triage:", 1).replace(
            "until='crash' and 'compile-error' compile", "triage compiles") + where()) from None
    groups: dict[str, TriageGroup] = {}
    compiled: list[str] = []
    attempts: dict[str, list[Attempt]] = {}
    passes: dict[str, list[str | None]] = {}
    for f in files:
        tries = [_attempt(f, topology, timeout) for _ in range(repeat)]
        attempts[f] = tries
        if progress is not None:
            progress(f, tries)
        sigs = [a.signature for a in tries]
        failed = [s for s in sigs if s is not None]
        if not failed:
            compiled.append(f)
            continue
        sig = Counter(failed).most_common(1)[0][0]
        g = groups.get(sig)
        if g is None:
            g = groups[sig] = TriageGroup(sig, [], next(a.message for a in tries if a.signature == sig))
        g.files.append(f)
        g.flaky = g.flaky or len(set(sigs)) > 1
        if not sig.startswith(("loading:", "timeout:")):
            passes.setdefault(sig, []).append(_last_pass_of(f, topology, timeout))
    for sig, seen in passes.items():
        said = {p for p in seen if p is not None}
        groups[sig].last_pass = said.pop() if len(said) == 1 else None
    ordered = sorted(groups.values(), key=lambda g: (-g.count, g.signature))
    if repro_dir is not None:
        repro_time = SECONDS.check(repro_time, "triage: repro_time")
        os.makedirs(repro_dir, exist_ok=True)
        for k, g in enumerate(ordered):
            _shrink(g, os.path.join(os.fspath(repro_dir), f"group_{k + 1}.hlo"), device, repro_time)
    return TriageReport(ordered, compiled, "cpu" if topology is None else topology, repeat, attempts)


def _shrink(g: TriageGroup, out: str, device: Any, seconds: float) -> None:
    """``g``'s example shrunk by the reducer into ``out`` (``g.repro``), or ``g.repro_note`` saying why not."""
    from ._atomic import atomic_write
    from .reducer import NotReproducedError, reduce

    if g.signature.startswith(("loading:", "timeout:")):
        g.repro_note = "the modules fail loading or run past the time limit; the reducer keeps what compiles"
        return
    until = "crash" if g.signature.startswith("abort") else "compile-error"
    try:
        res = reduce(g.example, until, max_time=seconds, device=device)
    except NotReproducedError as e:  # a flaky group: the example did not fail this way again
        g.repro_note = f"the example did not fail again ({' '.join(str(e).split())[:200]})"
        return
    except XlaSdkError as e:
        g.repro_note = f"the reducer could not work on it: {' '.join(str(e).split())[:200]}"
        return
    atomic_write(out, res.hlo_text.encode())
    g.repro, g.repro_instructions = out, res.instructions_after


# -- the page (TriageReport.html, triage --html) ---------------------------------------------------
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


def _link(path: str, page_dir: str | None) -> str:
    """``path`` as a link (relative to the page where it can be) showing the path itself."""
    return f"<a href=\"{_href(path, page_dir)}\">{_e(path)}</a>"


def triage_html(report: TriageReport, page_path: str | None = None) -> str:
    """The report as a self-contained page: a summary, then one row per group (its signature whole,
    count, last pass, flaky mark, example, small repro linked when there is one), each group's files
    and XLA's message, and the modules that compiled. ``page_path``: where the page will be written
    (links to the repros are made relative to its directory)."""
    page_dir = None if page_path is None else os.path.dirname(os.path.abspath(page_path))
    failing = sum(g.count for g in report.groups)
    total = failing + len(report.compiled)
    out = ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\">",
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
           "<title>xlasdk triage</title>",
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
                       f"<td>{_e(g.last_pass or '-')}</td>{flaky}<td>{_link(g.example, page_dir)}</td>"
                       f"<td>{repro}</td></tr>")
        out.append("</table>")
        for k, g in enumerate(report.groups, 1):
            out.append(f"<h2 id=\"details-{k}\">group {k}: {g.count} module{'s' if g.count != 1 else ''}</h2>")
            out.append(f"<pre>{_e(g.signature)}</pre>")
            out.append("<p>XLA's message (the example's):</p>")
            out.append(f"<pre>{_e(g.message)}</pre>")
            out.append("<ul>" + "".join(f"<li>{_link(f, page_dir)}</li>" for f in g.files) + "</ul>")
    if report.compiled:
        out.append("<h2>compiled</h2><ul>" + "".join(f"<li>{_link(f, page_dir)}</li>" for f in report.compiled)
                   + "</ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
