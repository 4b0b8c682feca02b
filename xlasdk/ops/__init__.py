"""One function per XLA operation, named as in XLA's *operation semantics*.

Each op lives in the module of its family, beside its shape rule:
``sources`` (Parameter, Constant, Iota), ``elementwise`` (unary, binary, comparisons, Select,
Clamp), ``fma`` (Fma), ``convert`` (ConvertElementType, BitcastConvertType, ReducePrecision), ``shaping``
(Broadcast, Reshape, Transpose, Slice, ConcatInDim...), ``linalg`` (Dot, DotGeneral, Cholesky,
TriangularSolve), ``decompositions`` (QR, LU, Eigh, SVD...), ``conv`` (ConvGeneralDilated, Conv),
``reduce`` (Reduce, Map, BatchNormTraining/Inference/Grad), ``window`` (ReduceWindow...),
``indexing`` (Gather, Scatter, DynamicSlice...), ``sort``, ``fft``, ``random``, ``special``,
``collectives``, ``control`` (Tuple, GetTupleElement, While, Conditional, Call), ``side_effects``
(tokens, infeed/outfeed), ``custom_call`` and ``host_callback``.

Each family module defines its ops' rows of the op table (:mod:`xlasdk._optable`) beside their
wrappers; see "Adding an op" in CONTRIBUTING.md.
"""

from __future__ import annotations

from ..attrs import TriangularSolveOptions_Transpose
from . import (
    _props,  # noqa: F401  - the tools' op properties (OpProps), declared on the rows
    collectives,
    control,
    conv,
    convert,
    custom_call,
    decompositions,
    elementwise,
    fft,
    fma,
    host_callback,
    indexing,
    linalg,
    lu,
    random,
    reduce,
    shaping,
    side_effects,
    sort,
    sources,
    special,
    window,
)
from .collectives import *  # noqa: F403
from .control import *  # noqa: F403
from .conv import *  # noqa: F403
from .convert import *  # noqa: F403
from .custom_call import *  # noqa: F403
from .decompositions import *  # noqa: F403
from .elementwise import *  # noqa: F403
from .fft import *  # noqa: F403
from .fma import *  # noqa: F403
from .host_callback import *  # noqa: F403
from .indexing import *  # noqa: F403
from .linalg import *  # noqa: F403
from .lu import *  # noqa: F403
from .random import *  # noqa: F403
from .reduce import *  # noqa: F403
from .shaping import *  # noqa: F403
from .side_effects import *  # noqa: F403
from .sort import *  # noqa: F403
from .sources import *  # noqa: F403
from .special import *  # noqa: F403
from .window import *  # noqa: F403

# Every family module lists its public ops in its __all__; this package exports them all.
__all__ = ["TriangularSolveOptions_Transpose"]
__all__ += collectives.__all__
__all__ += control.__all__
__all__ += conv.__all__
__all__ += convert.__all__
__all__ += custom_call.__all__
__all__ += decompositions.__all__
__all__ += elementwise.__all__
__all__ += fft.__all__
__all__ += fma.__all__
__all__ += host_callback.__all__
__all__ += indexing.__all__
__all__ += linalg.__all__
__all__ += lu.__all__
__all__ += random.__all__
__all__ += reduce.__all__
__all__ += shaping.__all__
__all__ += side_effects.__all__
__all__ += sort.__all__
__all__ += sources.__all__
__all__ += special.__all__
__all__ += window.__all__
