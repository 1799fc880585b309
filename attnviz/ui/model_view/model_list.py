"""The models the Pretrained panel offers beyond the ready ones: checkpoints in the local Hugging Face cache.

Read offline from config files and safetensors headers (through the panel's
:class:`~attnviz.checkpoints.study.CheckpointStudy`); each entry shows the repo id, family, size and
stored dtype, and its tooltip the snapshot folder.

Listing the cache imports huggingface_hub and scans the folder (about 0.4 s of CPU), so the panel runs
:func:`list_models` on a worker and hands its answer to :func:`add_listed_models` on the GUI thread.
"""

from __future__ import annotations

from PySide6.QtCore import Qt


def list_models(study, ready: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """(tooltips of the ``ready`` entries, given as (text, folder): [(folder, tooltip)], the cache's
    (label, folder, repo id)); reads files only, so it may run on any thread."""
    tips = [(folder, f"{study.ready_label(folder, text)}\n{folder}") for text, folder in ready]
    return tips, study.cached_models()


def add_listed_models(combo, listing) -> int:
    """Put a :func:`list_models` answer in the model combo: the ready entries' tooltips, and the cache's models
    not offered yet before its last entry ("Open folder…"); returns how many models the cache holds."""
    tips, entries = listing
    for folder, tip in tips:
        index = combo.findData(folder)
        if index >= 0:
            combo.setItemData(index, tip, Qt.ItemDataRole.ToolTipRole)
    for label, folder, _rid in entries:
        if combo.findData(folder) < 0:
            combo.insertItem(max(combo.count() - 1, 0), label, folder)
            combo.setItemData(combo.findData(folder), folder, Qt.ItemDataRole.ToolTipRole)
    return len(entries)

