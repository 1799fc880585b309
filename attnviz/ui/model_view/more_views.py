"""The Pretrained panel's further tabs beside "Layers × heads", "Image" and "Corpus": each module listed here
adds its tab through an ``install(panel)`` function and follows the panel's signals (``model_loaded``,
``attention_ready``, ``head_selected``), so the panel itself stays unaware of what they show.
"""

from __future__ import annotations

from attnviz.ui.model_view import audio_view, generate_view, intervene_view, vlm_generate_view


def install_more(panel) -> None:
    """Install each further view on ``panel`` as ``panel.<attribute>`` (imports stay static: the bundle's
    analysis follows them)."""
    views = (("intervention", intervene_view.install), ("generation", generate_view.install),
             ("vlm_generation", vlm_generate_view.install), ("vlm_intervention", intervene_view.install_vlm),
             ("audio", audio_view.install))
    for attribute, install in views:
        setattr(panel, attribute, install(panel))
