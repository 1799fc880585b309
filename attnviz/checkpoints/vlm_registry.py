"""model_type -> the module that loads that multimodal family (each module's ``load(folder, cfg, name)``
returns a :class:`~attnviz.checkpoints.multimodal.MultimodalCheckpoint`)."""

from __future__ import annotations

import importlib

# config.json model_type -> module with load(folder: Path, cfg: dict, name: str | None) -> MultimodalCheckpoint
FAMILIES: dict[str, str] = {
    "llava": "attnviz.checkpoints.llava",
    "idefics3": "attnviz.checkpoints.idefics3",
    "smolvlm": "attnviz.checkpoints.idefics3",
    "paligemma": "attnviz.checkpoints.paligemma",
}
FAMILIES["smolvla"] = "attnviz.checkpoints.vla_smolvla"  # lerobot's config.json says "type": "smolvla"
NAMES = {"llava": "LLaVA-1.5"}  # model_type -> family name in lists and messages
NAMES["paligemma"] = "PaliGemma"
NAMES["smolvla"] = "SmolVLA"
NAMES |= {"idefics3": "Idefics3", "smolvlm": "SmolVLM"}


def is_multimodal(model_type) -> bool:
    return isinstance(model_type, str) and model_type in FAMILIES


def loader(model_type: str):
    """The family module's ``load`` function."""
    return importlib.import_module(FAMILIES[model_type]).load
