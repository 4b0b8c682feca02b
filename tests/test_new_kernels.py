"""jaxlib's element-wise CPU kernels of 0.12.1 (``cpu_lgamma_ffi``, ``cpu_digamma_ffi``: JAX 0.12.1's
lowering of ``gammaln`` / ``digamma``) in a loaded module: registered and run to the right values
where jaxlib has them, checked against their contract at load, and under an older jaxlib a compile
error that names the release that has them."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

import xlasdk as xs

HAS_KERNELS = importlib.util.find_spec("jaxlib.cpu._math") is not None


def _module(target: str, result: str = "f32[2,3]{1,0}") -> str:
    return f"""HloModule m, entry_computation_layout={{(f32[2,3]{{1,0}})->{result}}}

ENTRY main {{
  x = f32[2,3]{{1,0}} parameter(0)
  ROOT r = {result} custom-call(x), custom_call_target="{target}", {_ATTRS}
}}
"""


_ATTRS = "operand_layout_constraints={f32[2,3]{1,0}}, api_version=API_VERSION_TYPED_FFI, backend_config={}"


X = np.array([[0.5, 1.0, 1.5], [2.0, 3.5, 10.0]], np.float32)


@pytest.mark.parametrize("target,fn", [("cpu_lgamma_ffi", math.lgamma), ("cpu_digamma_ffi", None)])
def test_the_kernels_run_or_name_the_release(target: str, fn: object) -> None:
    comp = xs.XlaComputation.from_hlo_text(_module(target))
    if not HAS_KERNELS:
        with pytest.raises(xs.CompileError, match=rf"{target} is a CPU kernel of jaxlib 0\.12\.1 and newer"):
            xs.compile(comp, device="cpu:0")
        return
    got = xs.compile(comp, device="cpu:0")(X).to_numpy()
    (ref,) = xs.evaluate(comp, X)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-6)  # the kernel against the reference's rule
    if fn is not None:
        np.testing.assert_allclose(got, np.vectorize(fn)(X.astype(np.float64)), rtol=2e-6, atol=1e-6)
    assert xs.compare(comp, [X]).ok


def test_a_kernel_call_claiming_another_shape_is_refused_at_load() -> None:
    with pytest.raises(xs.FormatError, match=r"cpu_lgamma_ffi.*f32\[2,3\]"):
        xs.XlaComputation.from_hlo_text(_module("cpu_lgamma_ffi", "f32[64,64]{1,0}"))
