"""The Pretrained panel's "Open mask in Mask workspace": a vision-language(-action) run's own mask (or a Swin
layer's window mask over its patches) as a new session of its segments (:func:`attnviz.model.mask_session.session_for_model_mask`, whose design
reproduces the mask cell for cell), opened in the window like File ▸ New — asking first when the current
session has unsaved changes — and the Mask workspace brought forward. A panel without a window replaces
its session by one undoable step instead.
"""

from __future__ import annotations

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.study import mask_segments
from attnviz.model.commands import SetFields
from attnviz.model.mask.segmented import describe_design
from attnviz.model.mask_session import ModelSegment, session_for_model_mask
from attnviz.model.state import FIELDS
from attnviz.ui.messages import Level


def model_mask_state(result):
    """The session of ``result``'s segments (a MultimodalAttention) under its own mask."""
    segs = [ModelSegment(*row) for row in mask_segments(result)]
    return session_for_model_mask(result.mask, segs, labels=result.labels)


def window_mask_state(result, config, layer: int):
    """The session of a Swin run's patches under stage 0's layer ``layer``'s window mask."""
    from attnviz.checkpoints.swin_stages import layer_window_mask

    mask = layer_window_mask(config, result.grid, layer)  # (T, T)
    return session_for_model_mask(mask, [ModelSegment("patches", 0, mask.shape[0], "image")], labels=result.labels)


def open_model_mask(widget, ctx, result, *, config=None, layer: int | None = None) -> bool:
    """Open ``result``'s mask as a session in the Mask workspace (with ``config`` and ``layer``: that Swin layer's
    window mask); False when the person cancels or it fails (said through ``ctx.report``)."""
    try:
        state = model_mask_state(result) if layer is None else window_mask_state(result, config, layer)
    except (ValueError, CheckpointError) as exc:
        ctx.report(Level.ERROR, f"cannot open the mask of {result.model}: {exc}")
        return False
    win = widget.window()
    files = getattr(win, "files", None)
    if files is not None and hasattr(win, "show_workspace"):
        if not files.maybe_save(f"opening the mask of {result.model}"):
            return False
        files._replace(state, None, dirty=True)
        win.show_workspace("mask")
    elif not ctx.execute(SetFields(tuple((name, getattr(state, name)) for name in FIELDS),
                                   label=f"Open the mask of {result.model}")):
        return False
    names = ", ".join(s.name for s in state.sources)
    ctx.report(Level.INFO, f"the mask of {result.model} as a session of its segments ({names}): {describe_design(state.mask)}")
    return True
