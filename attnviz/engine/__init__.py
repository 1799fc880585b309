"""The attention engine: numpy + numba only, imports nothing else from attnviz.

Public entry: :func:`attention` (kernels ``"reference"``, ``"naive"``, ``"flash"``), :class:`AttentionResult`,
:class:`BlockMask`, :class:`TiledMask` (a mask kept per tile, for sequences too long for a dense one), :func:`recompute_weights`, :func:`lse_summaries` (per-head row statistics from q, k and lse, tile by tile), :func:`display_matrices`, :func:`attention_overview`, :func:`warmup`, the thread
cap :func:`set_num_threads`, the float32 GELU of :mod:`attnviz.engine.activations`, and the float64 numpy :func:`masked_softmax` and :func:`row_entropy`. Conventions: ``mask[i, j] == True`` means query i may attend to key j;
softmax runs over keys; a fully masked row gives weights 0, output 0 and lse = -inf, never NaN.
``attention(..., softcap=c)`` soft-caps the scaled scores at c tanh(s / c) (reference and naive kernels;
:func:`recompute_weights` and :func:`attention_overview` take the same ``softcap``).
"""

from attnviz.engine import jitcache as _jitcache  # first: points numba's cache at a writable directory

from attnviz.engine.api import KERNELS, attention
from attnviz.engine.blockmask import EMPTY, FULL, PARTIAL, BlockMask
from attnviz.engine.display import display_matrices
from attnviz.engine.overview import attention_overview
from attnviz.engine.result import AttentionResult
from attnviz.engine.runtime import get_num_threads, set_num_threads
from attnviz.engine.tiled_mask import TiledMask
from attnviz.engine.softmax import masked_softmax, row_entropy
from attnviz.engine.summaries import lse_summaries
from attnviz.engine.warmup import warmup
from attnviz.engine.weights import recompute_weights

__all__ = [
    "attention", "AttentionResult", "KERNELS", "BlockMask", "TiledMask", "EMPTY", "PARTIAL", "FULL",
    "recompute_weights", "lse_summaries", "display_matrices", "attention_overview", "warmup", "set_num_threads", "get_num_threads",
    "masked_softmax", "row_entropy",
]
