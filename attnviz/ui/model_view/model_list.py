"""The models the Pretrained panel offers beyond the ready ones: checkpoints in the local Hugging Face cache.

Read offline from config files and safetensors headers (:mod:`attnviz.checkpoints.hub_cache`); each
entry shows the repo id, family, size and stored dtype, and its tooltip the snapshot folder.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

from attnviz.checkpoints.hub_cache import FoundCheckpoint, cache_dir, cached_models, describe_folder


def size_text(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else (f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}")


def entry_label(found: FoundCheckpoint) -> str:
    """'Qwen/Qwen2.5-0.5B · Qwen2 · 494.0 M · bf16' (and why, when attnviz cannot run it)."""
    label = f"{found.name} · {found.family} · {size_text(found.n_params)} · {found.dtype or '?'}"
    if not found.supported or found.note:
        label += f" ({found.note or 'not supported'})"
    return label


def cached_entries() -> list[tuple[str, str, str]]:
    """(label, folder, repo id) of every model in the hub cache."""
    out = []
    for rid, folder in cached_models():
        found = describe_folder(folder, rid, "cache")
        out.append((entry_label(found), str(folder), rid))
    return out


def cached_name(folder: str) -> str | None:
    """The repo id of a snapshot folder of the hub cache, None for other folders."""
    try:
        rel = Path(folder).resolve().relative_to(cache_dir().resolve())
    except (ValueError, OSError):
        return None
    parts = rel.parts[0].split("--") if rel.parts else []
    return "/".join(parts[1:]) if len(parts) >= 3 and parts[0] == "models" else None


def add_cached_models(combo) -> int:
    """Add the hub cache's models to the model combo (before its last entry, "Open folder…"); returns how many.
    The entries already there (the ready models) get their family, size and dtype as a tooltip."""
    for i in range(combo.count() - 1):
        folder = combo.itemData(i)
        found = describe_folder(folder, combo.itemText(i), "ready")
        combo.setItemData(i, f"{entry_label(found)}\n{folder}", Qt.ItemDataRole.ToolTipRole)
    entries = cached_entries()
    for label, folder, _rid in entries:
        if combo.findData(folder) < 0:
            combo.insertItem(max(combo.count() - 1, 0), label, folder)
            combo.setItemData(combo.findData(folder), folder, Qt.ItemDataRole.ToolTipRole)
    return len(entries)
