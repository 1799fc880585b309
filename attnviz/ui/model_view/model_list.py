"""The models the Pretrained panel offers beyond the ready ones: checkpoints in the local Hugging Face cache.

Read offline from config files and safetensors headers (through the panel's
:class:`~attnviz.checkpoints.study.CheckpointStudy`); each entry shows the repo id, family, size and
stored dtype, and its tooltip the snapshot folder.
"""

from __future__ import annotations

from PySide6.QtCore import Qt


def add_cached_models(combo, study) -> int:
    """Add the hub cache's models to the model combo (before its last entry, "Open folder…"); returns how many.
    The entries already there (the ready models) get their family, size and dtype as a tooltip."""
    for i in range(combo.count() - 1):
        folder = combo.itemData(i)
        combo.setItemData(i, f"{study.ready_label(folder, combo.itemText(i))}\n{folder}", Qt.ItemDataRole.ToolTipRole)
    entries = study.cached_models()
    for label, folder, _rid in entries:
        if combo.findData(folder) < 0:
            combo.insertItem(max(combo.count() - 1, 0), label, folder)
            combo.setItemData(combo.findData(folder), folder, Qt.ItemDataRole.ToolTipRole)
    return len(entries)
