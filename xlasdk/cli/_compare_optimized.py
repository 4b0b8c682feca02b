"""``xlasdk compare FILE --optimized-hlo --against-python PATH [--topology v5e:1x1]``: the optimized
HLO of FILE in this environment and in another one (another jaxlib / libtpu release) compared
instruction by instruction (:func:`xlasdk.reference._other_env.compare_optimized_hlo`)."""

from __future__ import annotations

import argparse
import json
from typing import IO, Any

from ._common import EXIT_OK, UsageError, _stage, _xla_flags, dump_options

EXIT_DIFFERENT = 1


def compare_optimized(args: argparse.Namespace, comp: Any, env: Any, out: IO[str]) -> int:
    """Compile ``comp`` here and in ``env`` for ``args.topology`` (a TPU without a chip) or the CPU,
    print the diff (and ``--json``); exit 1 when they differ."""
    from xlasdk.errors import CompileError, OtherEnvironmentError, XlaSdkError
    from xlasdk.reference._other_env import compare_optimized_hlo

    dump_opts, dump_line = dump_options(args)
    flags = {**dump_opts, **_xla_flags(args.xla_flags)}
    _stage("compiling in both environments")
    try:
        diff = compare_optimized_hlo(comp, env, topology=args.topology, xla_flags=flags)
    except OtherEnvironmentError as e:
        version = getattr(args, "against_jaxlib", None)
        if version is not None and args.topology is not None and "libtpu" in str(e):
            raise UsageError(
                f"--against-jaxlib {version} --topology {args.topology}: the environment xlasdk makes for "
                f"--against-jaxlib holds jaxlib alone, no libtpu; make one with the libtpu release to compare "
                f"(python -m venv D && D/bin/pip install jaxlib=={version} libtpu==RELEASE numpy ml_dtypes) "
                "and give --against-python D/bin/python") from None
        raise UsageError(str(e)) from None
    except CompileError as e:
        raise UsageError(f"{args.file}: XLA could not compile it here for {args.topology or 'the CPU'}: {e}") from None
    except XlaSdkError as e:
        if "topology" in str(e).lower() or "libtpu" in str(e).lower():
            raise UsageError(f"--topology {args.topology}: {str(e).split(' — at ')[0]}") from None
        raise
    out.write(dump_line)
    out.write(diff.text() + "\n")
    if args.json:
        from xlasdk._atomic import atomic_write

        try:
            atomic_write(args.json, json.dumps(diff.as_dict(), indent=2).encode() + b"\n")
        except OSError as e:
            raise UsageError(f"--json {args.json}: cannot write: {e.strerror or e}") from None
    return EXIT_OK if diff.same else EXIT_DIFFERENT
