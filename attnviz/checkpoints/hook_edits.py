"""What the exported hook scripts write of an intervention, as plain Python: each layer's head edits in the order
attnviz applies them (:func:`layer_edits`) and a knockout's removed edges (:func:`removed_edges`). Shared by the
Swin, encoder-decoder and robot-policy exporters (``intervention_*_code``)."""

from __future__ import annotations


def plain_value(f):
    """A factor (float), given values (a list of floats) or None, as plain Python."""
    if f is None:
        return None
    return [float(x) for x in f] if isinstance(f, (list, tuple)) or hasattr(f, "tolist") else float(f)


def layer_edits(ablate=None, scale=None, patch=None) -> dict[int, list]:
    """{layer: [(head, "zero" | "mean" | "set" | "scale" | "patch", None | values | factor)]}, in the order attnviz
    applies them: ablation ("set": given values), scaling, patching (``patch``: (layer, head) pairs)."""
    out: dict[int, list] = {}
    for (layer, head), how in sorted((ablate or {}).items()):
        entry = (int(head), how, None) if isinstance(how, str) else (int(head), "set", plain_value(list(how)))
        out.setdefault(int(layer), []).append(entry)
    for (layer, head), f in sorted((scale or {}).items()):
        out.setdefault(int(layer), []).append((int(head), "scale", float(f)))
    for layer, head in sorted(patch or ()):
        out.setdefault(int(layer), []).append((int(head), "patch", None))
    return out


def removed_edges(mask) -> list[list[int]]:
    """[head (-1: every head), query, key] of a (rows, cols) or (nh, rows, cols) bool array-like of removed edges."""
    rows = mask.tolist() if hasattr(mask, "tolist") else mask
    if rows and rows[0] and isinstance(rows[0][0], (list, tuple)):
        return [[h, i, j] for h, plane in enumerate(rows) for i, row in enumerate(plane) for j, v in enumerate(row) if v]
    return [[-1, i, j] for i, row in enumerate(rows) for j, v in enumerate(row) if v]


class RecordedInScript:
    """Stands in for the clean pass a study's edit builder reads a patched head from, when the exported script
    records that head itself: ``heads[stack][layer][head]`` is this object again."""

    def __init__(self, stack: str):
        self.heads = {stack: _Any()}


class _Any:
    def __getitem__(self, _key):
        return self
