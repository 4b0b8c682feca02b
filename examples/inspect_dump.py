"""Walk a real XLA dump, expose an intermediate value, run it, and check it against numpy.

The dump is XLA's HLO of one SGD step of a small conv net, written by JAX with
``XLA_FLAGS=--xla_dump_to=...`` (``tests/data/dumps/convnet_train``, made by
``tools/make_dump_corpus.py``). The program returns only the updated weights and the loss; here its
first convolution (the first layer's activations) becomes an output, and numpy checks it.

    python examples/inspect_dump.py [DUMP_FILE]

Prints the first instructions, the exposed convolution's shape, and MATCH (exit 0) or MISMATCH (exit 1).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import xlasdk as xs

HERE = Path(__file__).resolve().parent
DUMP = HERE.parent / "tests/data/dumps/convnet_train"


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DUMP / "module.before_optimizations.txt"
    comp = xs.load_computation(path)

    # Walk: every instruction of the entry computation, parameters first, in topological order.
    instrs = comp.instructions()
    print(f"{path.name}: {len(instrs)} instructions")
    for ins in instrs[:12]:
        operands = ", ".join(o.name for o in ins.operands)
        print(f"  {ins.name:<26} {ins.opcode:<28} {str(ins.shape):<18} ({operands})  {ins.metadata.op_name}")

    # Expose: the first convolution and its two operands become the program's outputs.
    conv = next(i for i in instrs if i.opcode == "stablehlo.convolution")
    lhs, rhs = conv.operands
    print(f"exposing {conv.name} = convolution({lhs.name}, {rhs.name}) -> {conv.shape}, "
          f"from {conv.metadata.source_file}:{conv.metadata.source_line}")
    probe = comp.with_outputs([conv, lhs, rhs])

    # Run it on the inputs JAX ran the program on (recorded beside the dump).
    with np.load(DUMP / "io.npz") as io:
        args = [io[f"in{k}"] for k in range(len(io["in_dtypes"]))]
    out, x, w = (a.to_numpy() for a in xs.compile(probe)(*args))

    # numpy's SAME convolution (NHWC input, HWIO kernel, stride 1) of the same operands.
    kh, kw = w.shape[:2]
    xp = np.pad(x, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(1, 2))
    expected = np.einsum("nhwcij,ijco->nhwo", windows, w)
    ok = np.allclose(out, expected, rtol=1e-5, atol=1e-5)
    print("MATCH" if ok else "MISMATCH", f"(largest difference {np.abs(out - expected).max():.2e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
