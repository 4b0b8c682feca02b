"""The texts of bisect and find-nonfinite reports (``xlasdk.bisect``): the "HLO:" line of an
instruction with several results, and which op puts a NaN/Inf in which output.

Oracles: JAX's own HLO text of the same program (``Lowered.as_text(dialect="hlo")``, XLA's
converter run by JAX) for the opcode and tuple shape of a ``while`` and of a ``call``; the
program's dataflow written by hand in each test (which value reaches which output); numpy for
which values are NaN/Inf.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import xlasdk as xs
from xlasdk.reference.bisect import hlo_line


def _lowered(f: Any, *args: Any) -> tuple[xs.XlaComputation, str]:
    """``f`` jitted and lowered on ``args``: as an xlasdk computation (from its StableHLO) and as
    JAX's HLO text."""
    low = jax.jit(f).lower(*args)
    return xs.XlaComputation.from_stablehlo(low.as_text()), low.as_text(dialect="hlo")


def _jax_line(hlo: str, opcode: str) -> tuple[str, str]:
    """The shape and the attributes after the operands of the ``ENTRY`` instruction ``opcode`` of
    JAX's HLO text."""
    entry = hlo[hlo.index("ENTRY"):]
    m = re.search(rf"^\s*(?:ROOT )?%?\S+ = (\(.*?\)|\S+) {opcode}\(", entry, re.M)
    assert m is not None, entry
    return m.group(1), entry[m.end():].split("\n")[0]


def _elements(shape: str) -> list[str]:
    """The element shapes of a tuple shape's text, sorted (XLA may order a while's state its own way)."""
    return sorted(re.findall(r"[a-z]\w*\[[\d,]*\](?:\{[\d,]*\})?", shape))


def _scan(h: Any, x: Any) -> Any:
    def step(h: Any, xt: Any) -> tuple[Any, Any]:
        h = jnp.tanh(h * 0.5 + xt)
        return h, h.sum()

    return jax.lax.scan(step, h, x)


def test_hlo_line_of_a_scan_s_while_is_the_while_not_its_results_tuple() -> None:
    h, x = np.zeros(4, np.float32), np.zeros((3, 4), np.float32)
    comp, jax_hlo = _lowered(_scan, h, x)
    (w,) = [i for i in comp.instructions() if i.opcode == "stablehlo.while"]
    line = hlo_line(comp, w)
    m = re.fullmatch(r"(\S+) = (\(.*?\)) while\(tuple\(([^()]*)\)\), condition=%\S+, body=%\S+", line)
    assert m is not None, line
    assert m.group(1) == w.name
    shape, _ = _jax_line(jax_hlo, "while")
    assert _elements(m.group(2)) == _elements(shape) == sorted(["s32[]", "f32[4]{0}", "f32[3]{0}", "f32[3,4]{1,0}"])
    # the state tuple's elements are the while's operands, by their instruction names
    assert sorted(m.group(3).split(", ")) == sorted(o.name for o in w.operands)
    assert "tuple(" not in line.split(" while(")[0] and " tuple(" not in line


def test_hlo_line_of_eigh_s_call_is_the_call() -> None:
    a = np.array([[2, 1, 0], [1, 3, 1], [0, 1, 4]], np.float32)
    comp, jax_hlo = _lowered(jnp.linalg.eigh, a)
    multi = [i for i in comp.instructions() if i.opcode != "parameter" and i.shape.is_tuple()]
    assert multi, [(i.name, i.opcode) for i in comp.instructions()]
    (p,) = [i for i in comp.instructions() if i.opcode == "parameter"]
    for ins in multi:
        line = hlo_line(comp, ins)
        opcode = {"func.call": "call", "stablehlo.custom_call": "custom-call"}[ins.opcode]
        shape, rest = _jax_line(jax_hlo, opcode)
        assert line.startswith(f"{ins.name} = {shape} {opcode}({p.name})"), (line, shape)
        assert _elements(shape) == ["f32[3,3]{1,0}", "f32[3]{0}"]
        assert "tuple(" not in line


def test_hlo_line_of_a_single_result_op_and_of_a_parameter() -> None:
    comp, _ = _lowered(lambda x, y: (x / y, jnp.exp(x)), np.ones(4, np.float32), np.ones(4, np.float32))
    ins = {i.opcode: i for i in comp.instructions()}
    params = [i for i in comp.instructions() if i.opcode == "parameter"]
    div = ins["stablehlo.divide"]
    assert hlo_line(comp, div) == f"{div.name} = f32[4]{{0}} divide({params[0].name}, {params[1].name})"
    assert hlo_line(comp, params[1]) == f"{params[1].name} = f32[4]{{0}} parameter(1)"


# -- which op puts a NaN/Inf in which output -------------------------------------------------------------------------
X = np.array([1.0, -2.0, 3.0, 4.0], np.float32)  # log(-2) is NaN
Y = np.array([1.0, 0.0, 2.0, 4.0], np.float32)  # 1/0 is Inf


def _dropped_log_and_kept_divide(x: Any, y: Any) -> tuple[Any, Any]:
    """The trial's program: the NaN of ``log(x)`` is dropped by ``where``; the Inf of ``1 / y``
    reaches output 1."""
    safe = jnp.where(x > 0, jnp.log(x), 0.0)
    return safe.sum(), (1.0 / y) * 2


def _by_opcode(comp: xs.XlaComputation, opcode: str) -> xs.Instruction:
    (ins,) = [i for i in comp.instructions() if i.opcode == opcode]
    return ins


def test_find_nonfinite_tells_a_dropped_nan_from_the_op_that_puts_an_inf_in_an_output() -> None:
    with np.errstate(all="ignore"):  # the oracle: numpy on the program's dataflow
        assert np.isnan(np.log(X)).any() and np.isinf(1 / Y).any()
        assert np.isfinite(np.where(X > 0, np.log(X), 0).sum()) and np.isinf((1 / Y) * 2).any()
    comp, _ = _lowered(_dropped_log_and_kept_divide, X, Y)
    log, div = _by_opcode(comp, "stablehlo.log"), _by_opcode(comp, "stablehlo.divide")
    nf = xs.compare(comp, [X, Y], find_nonfinite=True).nonfinite
    assert nf.status == "found" and nf.culprit is not None and nf.culprit.name == log.name, str(nf)
    assert nf.outputs == (1,) and nf.in_outputs and nf.reaches == ()
    (src,) = nf.sources
    assert src.output == 1 and src.culprit is not None and src.culprit.name == div.name and not src.constant
    assert src.reference.startswith("also non-finite") and src.culprit.value.endswith("[1.0, inf, 0.5, 0.25]")
    assert src.culprit.hlo_line.startswith(f"{div.name} = f32[4]{{0}} divide(")
    text = str(nf).splitlines()
    assert "    its NaN/Inf reaches no output (the program drops it later)" in text
    k = text.index("  output 1 holds NaN/Inf; the first instruction on its path whose value has one while its "
                   "operands have none:")
    assert text[k + 1].startswith(f"    {div.name} (stablehlo.divide, instruction {div.index})"), text
    assert "output 1 holds NaN/Inf: its value reaches it" not in str(nf)


def test_find_nonfinite_follows_the_path_not_the_cone() -> None:
    """Both the masked log and the divide are in output 0's cone; only the divide's Inf reaches it."""
    comp, _ = _lowered(lambda x, y: jnp.where(x > 0, jnp.log(x), 0.0) + 1.0 / y, X, Y)
    log, div = _by_opcode(comp, "stablehlo.log"), _by_opcode(comp, "stablehlo.divide")
    assert log.index < div.index
    nf = xs.compare(comp, [X, Y], find_nonfinite=True).nonfinite
    assert nf.culprit is not None and nf.culprit.name == log.name and nf.reaches == () and nf.outputs == (0,)
    assert [(s.output, s.culprit.name if s.culprit else None) for s in nf.sources] == [(0, div.name)], str(nf)


def test_find_nonfinite_says_which_outputs_the_first_nan_reaches_and_names_the_others_source() -> None:
    comp, _ = _lowered(lambda x, y: (jnp.log(x) * 2, 1.0 / y, x + y), X, Y)
    log, div = _by_opcode(comp, "stablehlo.log"), _by_opcode(comp, "stablehlo.divide")
    nf = xs.compare(comp, [X, Y], find_nonfinite=True).nonfinite
    assert nf.culprit is not None and nf.culprit.name == log.name
    assert nf.outputs == (0, 1) and nf.reaches == (0,)
    assert [(s.output, s.culprit.name if s.culprit else None) for s in nf.sources] == [(0, log.name), (1, div.name)]
    text = str(nf)
    assert "    output 0 holds NaN/Inf: its value reaches it" in text.splitlines()
    assert "  output 1 holds NaN/Inf; the first instruction on its path" in text
    assert text.count(f"{log.name} (stablehlo.log") == 1  # not repeated as output 0's source


def test_find_nonfinite_json_carries_the_path_and_the_outputs_sources(tmp_path: Path) -> None:
    from tests.test_cli import cli

    comp, _ = _lowered(_dropped_log_and_kept_divide, X, Y)
    path = tmp_path / "nf.hlo"
    path.write_text(comp.as_hlo_text())
    np.savez(tmp_path / "in.npz", **{"0": X, "1": Y})
    code, out, err = cli("compare", str(path), "--inputs", str(tmp_path / "in.npz"), "--find-nonfinite", "--json",
                         str(tmp_path / "r.json"))
    assert code == 0, (out, err)
    loaded = xs.load_computation(path)
    log, div = _by_opcode(loaded, "stablehlo.log"), _by_opcode(loaded, "stablehlo.divide")
    nf = json.loads((tmp_path / "r.json").read_text())["nonfinite"]
    assert nf["culprit"]["name"] == log.name and nf["outputs"] == [1] and nf["reaches"] == []
    assert [(s["output"], s["culprit"]["name"], s["constant"]) for s in nf["sources"]] == [(1, div.name, False)]
    assert nf["sources"][0]["reference"].startswith("also non-finite")
    assert f"{div.name} (stablehlo.divide" in out


def test_find_nonfinite_names_a_constant_as_an_output_s_source_when_nothing_computed_is() -> None:
    comp, _ = _lowered(lambda x: (x + 1, jnp.full(3, -jnp.inf, jnp.float32)), np.ones(3, np.float32))
    consts = [i for i in comp.instructions() if i.opcode == "stablehlo.constant"
              and np.isinf(np.asarray(i.attributes["value"])).any()]
    assert len(consts) == 1, [(i.name, i.attributes) for i in comp.instructions()]
    nf = xs.compare(comp, [np.ones(3, np.float32)], find_nonfinite=True).nonfinite
    assert nf.status == "not localised" and nf.culprit is None and nf.outputs == (1,), str(nf)
    (src,) = nf.sources
    assert (src.output, src.constant) == (1, True) and src.culprit is not None and src.culprit.name == consts[0].name
    assert "  output 1 holds NaN/Inf; it comes from a constant of the program:" in str(nf).splitlines()
