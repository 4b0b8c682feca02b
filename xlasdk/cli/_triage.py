"""``xlasdk triage``: compile many modules in xlasdk's worker and group their failures
(:func:`xlasdk.triage`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import IO

from ._common import EXIT_OK, EXIT_RUNTIME, UsageError, _device, _stage, _topology_device


def _cmd_triage(args: argparse.Namespace, out: IO[str]) -> int:
    from xlasdk._triage import Attempt, module_files, triage
    from xlasdk.errors import XlaSdkError

    try:
        files = module_files(args.paths)
    except XlaSdkError as e:
        raise UsageError(str(e).split(" — at ")[0].removeprefix("triage: ")) from None
    device = _topology_device(args)
    if device is None and args.device is not None:
        device = _device(args)
    _stage("compiling")
    done = [0]

    def progress(path: str, tries: list[Attempt]) -> None:
        done[0] += 1
        said = sorted({a.signature or "compiled" for a in tries})
        sys.stderr.write(f"[{done[0]}/{len(files)}] {path}: {' | '.join(said)}\n")
        sys.stderr.flush()

    try:
        report = triage(files, device=device, repeat=args.repeat, timeout=args.timeout, progress=progress,
                        repro_dir=args.reduce, repro_time=args.reduce_time)
    except XlaSdkError as e:
        if not str(e).startswith("triage:"):
            raise
        raise UsageError(str(e).split(" — at ")[0].removeprefix("triage: ")) from None
    out.write(report.table() + "\n")
    if args.json is not None:
        from xlasdk._atomic import atomic_write

        try:
            atomic_write(args.json, (json.dumps(report.as_dict(), indent=2) + "\n").encode())
        except OSError as e:
            raise UsageError(f"--json {args.json}: cannot write: {e.strerror or e}") from None
        out.write(f"wrote {args.json}\n")
    if args.html is not None:
        from xlasdk._atomic import atomic_write

        try:
            atomic_write(args.html, report.html(args.html).encode())
        except OSError as e:
            raise UsageError(f"--html {args.html}: cannot write: {e.strerror or e}") from None
        out.write(f"wrote {args.html}\n")
    return EXIT_RUNTIME if report.groups else EXIT_OK
