"""JAX and xlasdk on one client in one process, in the order ``sys.argv[1]`` names
(``jax-first`` or ``xlasdk-first``); arrays cross without copies (tools/tpu_check.sh runs it on a TPU)."""

from __future__ import annotations

import sys

import numpy as np

import xlasdk as xs
from xlasdk import ops

b = xs.XlaBuilder("f")
x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (4,)), "x")
ops.Mul(x, x)
comp = b.build()
if sys.argv[1] == "xlasdk-first":
    exe = xs.compile(comp)
    c = xs.share_with_jax()
    import jax
    import jax.numpy as jnp

    print("same client:", jax.devices()[0].client is c._c)
else:
    import jax
    import jax.numpy as jnp

    jax.devices()
    exe = xs.compile(comp)
    print("same client:", jax.devices()[0].client is xs.default_device().client._c)
j = jnp.arange(4.0, dtype=jnp.float32)
d = xs.device_put(j)
print("device_put no copy:", d.unsafe_buffer_pointer() == j.unsafe_buffer_pointer())
out = exe(j)
assert isinstance(out, xs.DeviceArray)
jo = out.to_jax()
print("to_jax no copy:", jo.unsafe_buffer_pointer() == out.unsafe_buffer_pointer(), type(jo), jo, (jo + 1))
print(jax.jit(lambda a: a * 2)(jo))
