"""The attention engine: numpy + numba only, imports nothing else from attnviz.

Public entry: :func:`attention` (kernels ``"reference"``, ``"naive"``, ``"flash"``), :class:`AttentionResult`.
Conventions: ``mask[i, j] == True`` means query i may attend to key j; softmax runs over keys; a fully
masked row gives weights 0, output 0 and lse = -inf, never NaN.
"""

from attnviz.engine.api import attention
from attnviz.engine.result import AttentionResult

__all__ = ["attention", "AttentionResult"]
