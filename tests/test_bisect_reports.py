"""The texts of bisect and find-nonfinite reports (``xlasdk.bisect``): the "HLO:" line of an
instruction with several results, and which op puts a NaN/Inf in which output.

Oracles: JAX's own HLO text of the same program (``Lowered.as_text(dialect="hlo")``, XLA's
converter run by JAX) for the opcode and tuple shape of a ``while`` and of a ``call``; the
program's dataflow written by hand in each test (which value reaches which output); numpy for
which values are NaN/Inf.
"""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import xlasdk as xs
from xlasdk.bisect import hlo_line


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
