"""Any stage of a Swin checkpoint as a run of its own (its grid's tokens, its heads, its maps), for the views
that show a stage other than the first. Apart from :mod:`attnviz.checkpoints.swin`, which the family registry
imports, so that the pass does not depend on the run and loader modules that depend on the registry."""

from __future__ import annotations

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.preprocess import preprocess_image
from attnviz.checkpoints.run import ModelAttention, patch_labels
from attnviz.checkpoints.swin import forward_swin, stage_windows, window_mask


def stage_attention(ckpt, image, stage: int = 0, *, dtype=np.float32, kernel: str = "auto"):
    """A :class:`~attnviz.checkpoints.run.ModelAttention` of stage ``stage`` of a loaded Swin checkpoint on an
    (H, W, 3) uint8 image: that stage's layers laid into its (T_s, T_s) maps, its tokens "r,c" of its own grid
    (stage s's token r, c covers patches 2^s r .. 2^s (r + 1) - 1 down, likewise across), ``hidden`` the stage's
    output before its patch merging."""
    c = ckpt.config
    if c.model_type != "swin":
        raise CheckpointError(f"{ckpt.name} is a {c.model_type} model, not Swin: it has no stages")
    n = len(c.spec.depths)
    if isinstance(stage, bool) or not isinstance(stage, (int, np.integer)) or not 0 <= stage < n:
        raise CheckpointError(f"Swin stage {stage!r} does not exist; this model has stages 0 to {n - 1}")
    pixels = preprocess_image(image, ckpt.image)  # (3, H, W)
    stages, _ = forward_swin(c, ckpt.weights, pixels, dtype=dtype, kernel=kernel)
    st = stages[int(stage)]
    labels = patch_labels(st.grid, 0)
    return ModelAttention(model=f"{ckpt.name} stage {int(stage)}", kind="vit", tokens=labels, labels=list(labels),
                          special=np.zeros(len(labels), dtype=bool), attentions=st.maps(), hidden=st.hidden,
                          grid=st.grid, n_extra_tokens=0, pixels=pixels)


def layer_window_mask(config, grid: tuple[int, int], layer: int) -> np.ndarray:
    """(T, T) bool of stage 0's layer ``layer`` on a (gh, gw) patch grid: query i may see key j when both sit in
    one window (and, on a shifted layer, one region of the roll), in row-major patch order — the mask each of
    that layer's maps is zero outside of."""
    if config.model_type != "swin":
        raise CheckpointError(f"a {config.model_type} model has no windows")
    layers = stage_windows(config, tuple(grid))[0]
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= layer < len(layers):
        raise CheckpointError(f"Swin layer {layer!r} does not exist in stage 0 (layers 0 to {len(layers) - 1})")
    return window_mask(layers[int(layer)])
