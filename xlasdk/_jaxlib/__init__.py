"""The one layer of xlasdk that touches jaxlib internals.

``mlir``: the MLIR context, parsing, verification, StableHLO <-> HLO conversion and portable
artifacts. ``pjrt``: PJRT clients, compilation, transfers and execution.
Everything else in xlasdk imports jaxlib only through these modules, so a jaxlib release that
moves an internal needs changes here only.
"""

import os as _os

# XLA's C++ logging prints INFO lines (device counts) on client creation and WARNING lines that are
# not the user's business (on every partitioned compile, jaxlib 0.10.2 through 0.12: "Disabling
# Shardy and falling back to using GSPMD propagation" and GSPMD's deprecation notice). Keep stderr
# for errors unless the user asked for more (TF_CPP_MIN_LOG_LEVEL=0 shows everything).
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
