"""Failure signatures (:mod:`xlasdk._failure_signature`) on XLA's own words, and the triage report's
table and page.

Oracles: messages XLA:TPU and XLA:CPU wrote (copied from ../shared/accelerators/tpu-ops-failures.txt,
a v5e run of tests/ops, and from XLA:CPU here), whose classes are known by reading them: two
instances of one failure (another module's names, sizes, layouts, operands) have one signature; two
failures of different causes (another opcode, another element type, another check) have two. The
table and page hold each signature whole, whatever its length, and escape what XLA wrote.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from xlasdk import _triage as tr
from xlasdk._failure_signature import normalised, opcode, signature

_X64 = ("compiling 'jit_f' failed: UNIMPLEMENTED: While rewriting computation to not contain X{64|128} element "
        "types, XLA encountered an HLO for which this rewriting is not implemented: ")
#: the same failure twice (XLA:TPU's X64 rewriter, a reduce-precision), from two modules
RP_A = _X64 + ("%reduce-precision.11 = f64[6005]{0} reduce-precision(%p1.1), exponent_bits=8, mantissa_bits=7, "
               "metadata={op_name=\"jit(f)/reduce_precision\" source_file=\"/home/u/a.py\" source_line=12}")
RP_B = _X64 + "%reduce-precision.3 = f64[2,7]{1,0} reduce-precision(%constant.1), exponent_bits=5, mantissa_bits=10"
#: the same rewriter on other instructions: other failures
RNG = _X64 + ("%rng.7 = f64[64,1024]{1,0} rng(%constant.26, %constant.25), distribution=rng_uniform, "
              "metadata={op_name=\"jit(f)/rng\"}")
DOT = _X64 + "%dot.6 = s64[5] dot(%p0.1, %p1.1), lhs_contracting_dims={0}, rhs_contracting_dims={0}"
LAPACK_F64 = _X64 + ("%custom-call.1 = (f64[4,4]{0,1}, s32[4]{0}, s32[]) custom-call(%p0.1), "
                     "custom_call_target=\"lapack_dgetrf_ffi\", api_version=API_VERSION_TYPED_FFI")
LAPACK_F64_B = _X64 + ("%custom-call.5 = (f64[2,5,3]{1,2,0}, s32[2,3]{1,0}, s32[2]{0}) custom-call(%x.2), "
                       "custom_call_target=\"lapack_dgetrf_ffi\", api_version=API_VERSION_TYPED_FFI")
LAPACK_C128 = LAPACK_F64.replace("f64[4,4]", "c128[4,4]").replace("dgetrf", "zgetrf")
#: aborts in the TPU's precision rewriter: two checks
CVT_A = ("XLA aborted on this program (it died with SIGABRT: xprecision_rewriter.cc:2101] Unsupported CVT "
         "X{64|128} expansion from c128[19] to f32[19])")
CVT_B = ("XLA aborted on this program (it died with SIGABRT: xprecision_rewriter.cc:2101] Unsupported CVT "
         "X{64|128} expansion from pred[5,1] to c128[5,1])")
TUPLE = ("XLA aborted on this program (it died with SIGABRT: xprecision_rewriter.cc:3271] Check failed: "
         "operand->shape().IsTuple())")
FFT_F64 = "INVALID_ARGUMENT: during context [pre-optimization]: Unexpected operand type for FFT: f64[4,6]{1,0}"
FFT_C128 = "INVALID_ARGUMENT: during context [pre-optimization]: Unexpected operand type for FFT: c128[2,8]{1,0}"
INT2_A = ("INVALID_ARGUMENT: INT2 is not supported for second minor size 2, expected to be greater than or equal "
          "to sublane count * multichunk factor (16)")
INT2_B = INT2_A.replace("size 2,", "size 4,")
RET = ("INTERNAL: RET_CHECK failure (third_party/tensorflow/compiler/xla/hlo/ir/hlo_computation.cc:1761) "
       "ShapeUtil::Compatible(old_instruction->shape(), new_instruction->shape()) \"get-tuple-element.36\" "
       "(u32[2]{0:T(128)}) vs \"concatenate.9\" (u32[3]{0:T(128)})")
LLO = ("INTERNAL: LLO_CHECK failure (platforms/xla/service/jellyfish/llo_region_builder.cc:10718) "
       "!result_accuracy.has_value() Accuracy analysis for cbrt is not implemented yet.")
NOT_FOUND_A = ("NOT_FOUND: No registered implementation for custom call to xlasdk_no_such_target for platform "
               "Host")


def _sig(message: str) -> str:
    return signature(message, died="aborted" in message)


def test_one_failure_in_two_modules_has_one_signature() -> None:
    for a, b in ((RP_A, RP_B), (CVT_A, CVT_B), (LAPACK_F64, LAPACK_F64_B), (INT2_A, INT2_B)):
        assert _sig(a) == _sig(b), (a, b)


def test_different_failures_have_different_signatures() -> None:
    cases = [RP_A, RNG, DOT, LAPACK_F64, LAPACK_C128, CVT_A, TUPLE, FFT_F64, FFT_C128, INT2_A, RET, LLO,
             NOT_FOUND_A]
    sigs = [_sig(m) for m in cases]
    assert len(set(sigs)) == len(cases), sigs


def test_element_types_and_xlas_words_are_kept_names_and_sizes_blanked() -> None:
    s = _sig(LAPACK_C128)
    assert "X{64|128}" in s and "c128[_]" in s and "s32[_]" in s and '"lapack_zgetrf_ffi"' in s, s
    assert not re.search(r"\d+\]|\.1\b|%p0", s), s
    assert _sig(RP_A) == ("UNIMPLEMENTED (reduce-precision): While rewriting computation to not contain X{64|128} "
                          "element types, XLA encountered an HLO for which this rewriting is not implemented: "
                          "%_ = f64[_] reduce-precision(%_), exponent_bits=N, mantissa_bits=N")
    assert _sig(FFT_F64) == ("INVALID_ARGUMENT (fft): during context [pre-optimization]: Unexpected operand type "
                             "for FFT: f64[_]")
    assert normalised("at 0x7f3a12 in /tmp/xyz/abc.hlo from dir/sub/emitter.cc:12") == \
        "at N in PATH from emitter.cc:N"
    assert normalised('"fusion.12" and "my-op"') == '"fusion" and "my-op"'


def test_the_failing_instructions_opcode_joins_the_signature() -> None:
    assert _sig(CVT_A) == "abort at xprecision_rewriter.cc:2101 (convert)"
    assert _sig(TUPLE) == "abort at xprecision_rewriter.cc:3271"  # the check names no instruction
    assert _sig(RET) == "INTERNAL at hlo_computation.cc:1761 (get-tuple-element)"
    assert _sig(LLO) == "INTERNAL at llo_region_builder.cc:10718"
    assert opcode(RNG) == "rng" and opcode(DOT) == "dot" and opcode(LAPACK_F64) == "custom-call"
    assert opcode("Check failed in HandleDynamicSlice") == "dynamic-slice"
    assert opcode("nothing here") is None


def test_the_shared_failure_list_groups_as_read() -> None:
    """Every message of the v5e run: the precision rewriter's two aborts are two groups whatever the
    shapes; the X64 rewriter's refusals split by opcode and element type, never by size."""
    path = Path(__file__).resolve().parents[2] / "shared" / "accelerators" / "tpu-ops-failures.txt"
    if not path.is_file():
        import pytest

        pytest.skip(f"{path} is not here (it lives beside the repository)")
    msgs = [line.split(" failed: ", 1)[1] for line in path.read_text().splitlines() if " failed: " in line]
    sigs = {_sig(m) for m in msgs if "xprecision_rewriter.cc:2101" in m}
    assert sigs == {"abort at xprecision_rewriter.cc:2101 (convert)"}, sigs
    sigs = {_sig(m) for m in msgs if "xprecision_rewriter.cc:3271" in m}
    assert sigs == {"abort at xprecision_rewriter.cc:3271"}, sigs
    rp = {_sig(m) for m in msgs if "reduce-precision(" in m}
    rng = {_sig(m) for m in msgs if " rng(" in m}
    assert len(rp) == 1 and len(rng) == 1 and rp != rng


def _report() -> tr.TriageReport:
    long_sig = _sig(LAPACK_C128)
    groups = [tr.TriageGroup(_sig(RP_A), ["/m/a.hlo", "/m/b.hlo"], RP_A, last_pass="tpu/x64-rewriter",
                             repro="/m/repros/group_1.hlo", repro_instructions=2),
              tr.TriageGroup(long_sig, ["/m/<c>&.hlo"], LAPACK_C128, flaky=True,
                             repro_note="the reducer could not work on it: <why>")]
    return tr.TriageReport(groups, ["/m/ok.hlo"], "v5e:1x1", 2)


def test_the_table_shows_each_signature_whole() -> None:
    rep = _report()
    text = rep.table()
    assert len(rep.groups[1].signature) > 200
    for g in rep.groups:  # wrapped on the lines below its row, never cut
        joined = " ".join(line.strip() for line in text.splitlines() if line.startswith("    "))
        assert g.signature in joined, (g.signature, text)
    assert "flaky" in text and "tpu/x64-rewriter" in text and "3 of 4 modules failed on v5e:1x1 in 2 groups" in text
    assert json.loads(json.dumps(rep.as_dict()))["groups"][1]["signature"] == rep.groups[1].signature


def test_the_page_escapes_everything_and_links_the_repros(tmp_path: Path) -> None:
    rep = _report()
    page = rep.html(tmp_path / "out" / "t.html")
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert html.escape(rep.groups[1].signature, quote=True) in page
    assert "&lt;c&gt;&amp;.hlo" in page and "<c>" not in page and "&lt;why&gt;" in page
    assert 'class="flaky"' in page and "v5e:1x1" in page
    m = re.search(r'<a href="([^"]+)">group_1\.hlo</a> \(2 instructions\)', page)
    assert m is not None, page
    assert (tmp_path / "out" / html.unescape(m.group(1))).resolve() == Path("/m/repros/group_1.hlo").resolve()
    assert page.count("<tr id=\"group-") == 2 and "/m/ok.hlo" in page
    assert "Content-Security-Policy\" content=\"default-src 'none'" in page  # nothing runs, nothing is fetched
    m = re.search(r'<li><a href="([^"]+)">/m/ok\.hlo</a></li>', page)  # each module a link, as written
    assert m is not None and (tmp_path / "out" / html.unescape(m.group(1))).resolve() == Path("/m/ok.hlo").resolve()


def test_cli_writes_the_page_and_groups_xla_cpu_failures(tmp_path: Path) -> None:
    """Two custom calls to unregistered targets under other names and shapes are one group on
    XLA:CPU, a module that compiles none; --html writes the page (with XLA's message, escaped)."""
    import io

    from xlasdk.cli import main

    def cc(name: str, n: int, target: str) -> str:
        return (f"HloModule {name}\n\nENTRY main {{\n  p.{n} = f32[{n}] parameter(0)\n"
                f"  ROOT c.{n} = f32[{n}] custom-call(p.{n}), custom_call_target=\"{target}\"\n}}\n")

    (tmp_path / "a.hlo").write_text(cc("first", 3, "xlasdk_no_such_target"))
    (tmp_path / "b.hlo").write_text(cc("second", 17, "xlasdk_no_such_target"))
    (tmp_path / "c.hlo").write_text(cc("third", 5, "xlasdk_another_target"))
    (tmp_path / "ok.hlo").write_text("HloModule ok\n\nENTRY main {\n  ROOT p = f32[2] parameter(0)\n}\n")
    out, err = io.StringIO(), io.StringIO()
    rc = main(["triage", str(tmp_path), "--html", str(tmp_path / "t.html")], stdout=out, stderr=err)
    assert rc == 1, err.getvalue()
    page = (tmp_path / "t.html").read_text()
    assert "3 of 4 modules failed on cpu in 2 groups" in page, page
    assert "xlasdk_no_such_target" in page and "xlasdk_another_target" in page
    rep = tr.triage([tmp_path])
    assert sorted(g.count for g in rep.groups) == [1, 2]
