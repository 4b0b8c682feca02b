"""The one layer of xlasdk that touches jaxlib internals.

``mlir``: the MLIR context, parsing, verification, StableHLO <-> HLO conversion and portable
artifacts. ``pjrt``: PJRT clients, compilation, transfers and execution.
Everything else in xlasdk imports jaxlib only through these modules, so a jaxlib release that
moves an internal needs changes here only.
"""

import os as _os

# XLA's C++ logging prints INFO lines (device counts) on client creation; keep stderr for warnings
# and errors unless the user asked for more.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
