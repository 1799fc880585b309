"""The Pretrained panel's further tabs beside "Layers × heads", "Image" and "Corpus": each module listed here
adds its tab through an ``install(panel)`` function and follows the panel's signals (``model_loaded``,
``attention_ready``, ``head_selected``), so the panel itself stays unaware of what they show.

Each view is one step of :data:`VIEWS` that imports its module when it runs (plain import statements, which
the bundle's analysis follows), so the panel can build them on separate turns of the event loop.
"""

from __future__ import annotations

import importlib


def _intervention(panel):
    from attnviz.ui.model_view import intervene_view

    return intervene_view.install(panel)


def _generation(panel):
    from attnviz.ui.model_view import generate_view

    return generate_view.install(panel)


def _vlm_generation(panel):
    from attnviz.ui.model_view import vlm_generate_view

    return vlm_generate_view.install(panel)


def _vlm_intervention(panel):
    from attnviz.ui.model_view import intervene_view

    return intervene_view.install_vlm(panel)


def _audio(panel):
    from attnviz.ui.model_view import audio_view

    return audio_view.install(panel, panel.__dict__.pop("_audio_parts", None))


# (attribute of the panel, install step), in the order of their tabs
VIEWS = (("intervention", _intervention), ("generation", _generation), ("vlm_generation", _vlm_generation),
         ("vlm_intervention", _vlm_intervention), ("audio", _audio))


# Modules a view's step imports, the largest first loaded one per turn before it (tens of milliseconds each;
# together the Intervene tab's import alone was about a third of a second); its own imports stay static.
PRELOAD = {"intervention": ("attnviz.checkpoints.intervention_study", "attnviz.checkpoints.intervention_swin_study",
                            "attnviz.checkpoints.intervention_vla_study", "attnviz.ui.model_view.intervene_vlm",
                            "attnviz.ui.model_view.intervene_seq2seq", "attnviz.ui.model_view.intervene_view"),
           "audio": ("attnviz.ui.model_view.audio_view",)}


# Views whose plots are made ahead on turns of their own before the view: (host, steps), the steps being
# attnviz.ui.model_view.intervene_view.PART_STEPS (the view's constructor alone took a quarter of a second).
PARTS = {"intervention": ("panel", 6), "vlm_intervention": ("vlm", 6)}


def make_audio_parts(panel) -> None:
    """The Audio view's plots made ahead, a step before the view (attnviz.ui.model_view.audio_view.make_parts)."""
    from attnviz.ui.model_view import audio_view

    panel.__dict__["_audio_parts"] = audio_view.make_parts()


def preload(module: str) -> None:
    """Import ``module`` now (a step before the view that needs it)."""
    importlib.import_module(module)


def install_one(panel, attribute: str) -> None:
    """Install the further view ``attribute`` of :data:`VIEWS` on ``panel`` as ``panel.<attribute>``."""
    setattr(panel, attribute, dict(VIEWS)[attribute](panel))

