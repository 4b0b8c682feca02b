"""``OpMetadata`` and the current-source-info helper."""

from __future__ import annotations

import os
import sys
from typing import Any

from .._metadata import FIELDS, INT_FIELDS, location
from .._proto import _ProtoLike
from ..errors import ShapeError
from ._base import _dim

# --------------------------------------------------------------------------------------------
# Metadata.


class OpMetadata(_ProtoLike):
    """Debug metadata of an op: XLA's ``OpMetadata`` proto, ``metadata={...}`` in HLO text.

    Set it on a builder with :meth:`XlaBuilder.set_op_metadata <xlasdk.XlaBuilder.set_op_metadata>`
    or ``with b.op_metadata(...)``. Every field below is kept whole in ``as_hlo_text()`` (both
    the direct printer and XLA's converter), ``as_serialized_hlo_module_proto()``, and files
    saved as ``.hlo``, ``.pb``, ``.mlir`` and ``.mlirbc`` and loaded back. In StableHLO it is the
    op's location (see :meth:`to_mlir_location`), in the form XLA's converter reads.

    XLA's other ``OpMetadata`` fields are not user input: ``stack_frame_id`` indexes the stack
    frame table of XLA-made modules (HLO loaded from XLA's dumps keeps it, as HLO text and
    protos), ``profile_type`` / ``profile_info`` / ``size_of_*`` are compiler outputs, and
    ``preserve_layout`` is not read by XLA's HLO text parser.

    Attributes
    ----------
    op_type : str
        The framework-level op type (for example ``"Add"`` or ``"dot_general"``).
    op_name : str
        The framework-level op name (for example ``"jit(f)/add"``); XLA names the HLO
        instruction after its last ``/`` component.
    source_file : str
        The file that created the op.
    source_line : int
        The line in ``source_file``.
    source_end_line, source_column, source_end_column : int
        Where the op's source ends, and the columns (``0`` for the end line / column: the same
        as the start, as MLIR file locations and XLA's converter have it).
    deduplicated_name : str
        XLA's ``deduplicated_name`` (the name shared by instructions XLA deduplicated).
    scheduling_name : str
        XLA's ``scheduling_name`` (the name schedulers and scheduling annotations refer to).

    The first four may be given by position (as in the former ``xla_client.OpMetadata``), the
    others by keyword. Line and column numbers must be ints in ``[0, 2**31)`` (int32 in HLO).
    """

    _FIELDS = FIELDS  # XLA's OpMetadata fields xlasdk carries, in HLO printing order

    def __init__(
        self,
        op_type: str = "",
        op_name: str = "",
        source_file: str = "",
        source_line: int = 0,
        *,
        source_end_line: int = 0,
        source_column: int = 0,
        source_end_column: int = 0,
        deduplicated_name: str = "",
        scheduling_name: str = "",
    ):
        self.op_type = op_type
        self.op_name = op_name
        self.source_file = source_file
        self.source_line = source_line
        self.source_end_line = source_end_line
        self.source_column = source_column
        self.source_end_column = source_end_column
        self.deduplicated_name = deduplicated_name
        self.scheduling_name = scheduling_name

    def __repr__(self) -> str:
        """The first four fields always, the others when set."""
        shown = [
            f"{f}={v!r}"
            for i, (f, v) in enumerate(zip(self._FIELDS, self._values(), strict=True))
            if i < 4 or v
        ]
        return f"OpMetadata({', '.join(shown)})"

    def to_mlir_location(self) -> str:
        """The MLIR location carrying this metadata, e.g. ``loc(fused["n", "f.py":3:0])``.

        ``loc(fused<{EXTRA}>["OP_TYPE:", "OP_NAME", "FILE":LINE:COL to END_LINE:END_COL])``:
        a name ending in ``:`` is XLA's ``op_type``, another name its ``op_name``, the file
        range the ``source_*`` fields (no file part without ``source_file``); ``EXTRA`` holds
        what XLA's converter would drop or mangle (``deduplicated_name``, ``scheduling_name``,
        names holding an ``@``, ``op_name`` ending in ``:``, and the end of a range, which StableHLO
        portable artifacts do not keep). Parts not set are left out; ``loc(unknown)`` when
        nothing is set.

        Raises
        ------
        ShapeError
            If a line or column number is not an int >= 0.
        """
        fields: dict[str, Any] = {
            f: _dim(getattr(self, f), f"OpMetadata.{f}") if f in INT_FIELDS else str(getattr(self, f) or "")
            for f in self._FIELDS
        }
        return location(**fields)


def _mlir_str(s: str) -> str:
    """A double-quoted MLIR string literal."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.extend(f"\\{b:02X}" for b in ch.encode("utf-8"))
    return '"' + "".join(out) + '"'


def current_source_info_metadata(
    op_type: str | None = None, op_name: str | None = None, skip_frames: int = 1
) -> OpMetadata:
    """``OpMetadata`` holding the file (base name) and line of a caller.

    Parameters
    ----------
    op_type, op_name : str or None
        Copied into the metadata (None becomes ``""``).
    skip_frames : int
        How many frames up to look: 1 (default) is the function calling this one.

    Raises
    ------
    ShapeError
        If ``skip_frames`` is negative or deeper than the stack.
    """
    depth = _dim(skip_frames, "skip_frames")
    try:
        frame = sys._getframe(depth)
    except ValueError:
        raise ShapeError(f"skip_frames={depth} is deeper than the call stack") from None
    return OpMetadata(
        op_type=op_type or "",
        op_name=op_name or "",
        source_file=os.path.basename(frame.f_code.co_filename),
        source_line=frame.f_lineno,
    )


CurrentSourceInfoMetadata = current_source_info_metadata
