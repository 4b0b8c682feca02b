"""The per-call path of ``Executable.__call__``, generated once per executable.

:func:`fast_call` writes a function for one executable's parameter count and outputs, with every
per-call check unrolled against values computed once: a ``DeviceArray`` argument is accepted when
its interned ``(device, dtype, shape)`` is the parameter's (one identity test) and it is not
deleted; a numpy argument when its type is exactly ``np.ndarray``, its dtype is the parameter's
(by identity: a native-order dtype of the same type) and its shape is equal. The outputs are
built inline (the slots of :meth:`DeviceArray._wrap`, with its registration for
``Device.live_buffers``).

The function returns ``None``, having done nothing, for any argument it does not accept, and
the caller then takes the checked path (``Executable._call_mixed``), which converts what can be
converted and raises the errors. Nothing is put on the device before every argument passed.
Generated code is used, as :mod:`dataclasses` does, because a loop over the arguments costs
about as much as all the checks together (``bench/dispatch.py``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._jaxlib import pjrt
from ._device_array import DeviceArray, _live_prune_at, _meta_of, _prune_live, init_slots
from .device import _live

if TYPE_CHECKING:
    from ._arguments import _CallPlan

#: A generated call: the outputs (a DeviceArray, or a tuple of them for a tuple result), or None
#: when an argument is not one it accepts (nothing was done).
FastCall = Callable[[tuple[Any, ...]], Any]

#: Parameter counts above this get the loop (the generated function would only grow).
MAX_UNROLLED = 32


def _never(args: tuple[Any, ...]) -> None:
    """The call path of an executable that always takes the checked path."""
    return None


def fast_call(plan: _CallPlan, run: Callable[[list[Any]], list[Any]]) -> FastCall:
    """The generated call of an executable with call plan ``plan`` that runs through ``run``
    (:func:`xlasdk._jaxlib.pjrt.runner`): ``_never`` when the plan takes the checked path
    (several devices, a non-array parameter or output)."""
    if not plan.fast:
        return _never
    device = plan.device
    n = plan.nparams
    env: dict[str, Any] = {
        "ND": np.ndarray, "DA": DeviceArray, "new": object.__new__, "ref": weakref.ref,
        "live": _live, "live_append": _live.append, "prune_at": _live_prune_at, "prune": _prune_live,
        "put": pjrt.put, "sharding": plan.sharding, "jdevice": plan.jdevice, "run": run,
        "device": device,
    }
    for j, (dims, dtype) in enumerate(plan.outputs):
        env[f"om{j}"] = _meta_of(device, dtype, dims)
        env[f"os{j}"] = dims
        env[f"ot{j}"] = dtype
    lines = ["def make():", "  def fast(args):", f"    if len(args) != {n}:", "      return None"]
    if n > MAX_UNROLLED:
        lines += _loop_body(env, plan)
    else:
        lines += _unrolled_body(env, plan)
    outs = len(plan.outputs)
    for j in range(outs):
        lines += [
            f"    x{j} = new(DA)",
            *(f"    {line}" for line in init_slots(f"x{j}", arr=f"outs[{j}]", shape=f"os{j}", dtype=f"ot{j}",
                                                meta=f"om{j}")),
            f"    live_append(ref(x{j}))",
        ]
    lines += ["    if len(live) >= prune_at[0]:", "      prune()"]
    if plan.is_tuple:
        lines.append(f"    return ({''.join(f'x{j}, ' for j in range(outs))})")
    else:
        lines.append("    return x0")
    lines.append("  return fast")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), env, namespace)  # noqa: S102 (generated from counts, no user text)
    fn: FastCall = namespace["make"]()
    return fn


def _unrolled_body(env: dict[str, Any], plan: _CallPlan) -> list[str]:
    """Accept each argument (binding ``b{i}``: its buffer, or None for a numpy argument), then put
    the numpy ones, then run."""
    n = plan.nparams
    for i, (_spec, dtype, dims, aval) in enumerate(plan.checks):
        env[f"m{i}"] = _meta_of(plan.device, dtype, dims)
        env[f"t{i}"] = dtype
        env[f"s{i}"] = dims
        env[f"v{i}"] = aval
    lines = []
    if n:
        lines.append(f"    {''.join(f'a{i}, ' for i in range(n))}= args")
    for i in range(n):
        lines += [
            f"    if type(a{i}) is ND:",
            f"      if a{i}.dtype is not t{i} or a{i}.shape != s{i}:",
            "        return None",
            f"      b{i} = None",
            f"    elif type(a{i}) is DA and a{i}._meta is m{i}:",
            f"      b{i} = a{i}._arr",
            f"      if b{i} is None:",
            "        return None",
            "    else:",
            "      return None",
        ]
    for i in range(n):
        lines += [f"    if b{i} is None:", f"      b{i} = put(a{i}, v{i}, sharding, jdevice)"]
    lines.append(f"    outs = run([{', '.join(f'b{i}' for i in range(n))}])")
    return lines


def _loop_body(env: dict[str, Any], plan: _CallPlan) -> list[str]:
    """The same checks as :func:`_unrolled_body`, in a loop over per-parameter tuples."""
    env["checks"] = tuple(
        (_meta_of(plan.device, dtype, dims), dtype, dims, aval) for _spec, dtype, dims, aval in plan.checks
    )
    return [
        "    bufs = []",
        "    for a, (m, t, s, v) in zip(args, checks):",
        "      if type(a) is ND:",
        "        if a.dtype is not t or a.shape != s:",
        "          return None",
        "        bufs.append(None)",
        "      elif type(a) is DA and a._meta is m:",
        "        b = a._arr",
        "        if b is None:",
        "          return None",
        "        bufs.append(b)",
        "      else:",
        "        return None",
        "    for i, (a, (m, t, s, v)) in enumerate(zip(args, checks)):",
        "      if bufs[i] is None:",
        "        bufs[i] = put(a, v, sharding, jdevice)",
        "    outs = run(bufs)",
    ]
