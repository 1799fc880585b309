"""The "Pretrained model" panel: a local Hugging Face checkpoint (BERT-family, GPT-2, ViT) run on a
sentence or an image, with every layer's and head's attention, head summaries and, for ViT, the class
token's attention and the attention rollout over the image (see :mod:`attnviz.ui.model_view`)."""

from __future__ import annotations

import attnviz.ui.session_maps  # noqa: F401  (the window follows the panel with it once built: imported with it)
from attnviz.ui.model_view.panel import ModelViewPanel

__all__ = ["ModelViewPanel"]
