"""Write a tiny random Swin checkpoint with transformers' eager attention of every layer as its golden.

Run once, in a separate environment that has torch (CPU) and transformers 5 (attnviz never imports torch):

    /tmp/gold/bin/python tools/make_swin_goldens.py

``tests/data/checkpoints/tiny_swin``: a ``SwinModel`` (saved by ``save_pretrained``, so in the published tensor
layout: ``attention.self.query`` ...) on a 24 x 48 input, patch 2, so a 12 x 24 grid; window 3 (shift 1 in the
odd layers); stages of 2, 2 and 2 layers with 2, 2 and 4 heads, embed_dim 8 (widths 8, 16, 32); stage 2's
3 x 6 grid is no wider than the window, so transformers runs it unshifted. An absolute position table.
Its ``ViTImageProcessor`` resizes to 24 x 48.

``golden.npz``: ``image`` (34, 50, 3) uint8, ``pixel_values``, and for each layer ``attn_<stage>_<layer>``
the (windows, heads, w*w, w*w) weights its SwinAttention returns (a forward hook on every layer: transformers'
``output_attentions`` keeps only each stage's last layer); ``last_hidden_state`` (after the final LayerNorm);
``hidden_<stage>`` (T_s, C_s) each stage's output before its patch merging.

``tests/data/checkpoints/tiny_swin_cls``: the same weights inside a ``SwinForImageClassification`` (tensor names
under ``swin.``, as the published checkpoints keep them), no golden of its own.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch
from transformers import SwinConfig, SwinForImageClassification, SwinModel, ViTImageProcessor

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "checkpoints"


def _randomise(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * noise)
            else:
                p.copy_(0.4 * noise)


def _image() -> np.ndarray:
    image = np.random.default_rng(13).integers(0, 256, size=(34, 50, 3), dtype=np.uint8)  # (H, W, 3)
    image[:17, 25:] = 250  # a bright quarter so the picture has structure
    return image


def swin() -> None:
    d = OUT / "tiny_swin"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    torch.manual_seed(0)
    model = SwinModel(SwinConfig(image_size=(24, 48), patch_size=2, embed_dim=8, depths=[2, 2, 2],
                                 num_heads=[2, 2, 4], window_size=3, mlp_ratio=2.0, use_absolute_embeddings=True,
                                 layer_norm_eps=1e-5, drop_path_rate=0.0), add_pooling_layer=False)
    _randomise(model, 97)
    model.set_attn_implementation("eager")
    model.eval()
    model.save_pretrained(d)
    processor = ViTImageProcessor(size={"height": 24, "width": 48}, resample=2, image_mean=[0.5, 0.5, 0.5],
                                  image_std=[0.5, 0.5, 0.5])
    processor.save_pretrained(d)
    image = _image()
    pv = processor(images=image, return_tensors="pt")["pixel_values"]  # (1, 3, H, W)
    got: dict[str, np.ndarray] = {}

    def keep(key):
        def hook(module, args, output):
            got[key] = output[1].detach().numpy().astype(np.float32)  # (windows, heads, w*w, w*w)
        return hook

    handles = []
    for s, stage in enumerate(model.encoder.layers):
        for i, block in enumerate(stage.blocks):
            handles.append(block.attention.register_forward_hook(keep(f"attn_{s}_{i}")))
        handles.append(stage.blocks[-1].register_forward_hook(
            lambda m, a, o, s=s: got.__setitem__(f"hidden_{s}", o[0][0].detach().numpy().astype(np.float32))))
    with torch.no_grad():
        out = model(pixel_values=pv)
    for h in handles:
        h.remove()
    np.savez_compressed(d / "golden.npz", image=image, pixel_values=pv[0].numpy().astype(np.float32),
                        last_hidden_state=out.last_hidden_state[0].numpy().astype(np.float32), **got)
    print("tiny_swin:", sorted(got), out.last_hidden_state.shape)
    swin_classifier(model, processor)


def swin_classifier(base, processor) -> None:
    """``tiny_swin_cls``: a SwinForImageClassification holding tiny_swin's weights (so under ``swin.``, as the
    published Swin checkpoints are) with a 3-label head; its maps are tiny_swin's."""
    d = OUT / "tiny_swin_cls"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    cfg = base.config
    cfg.num_labels = 3
    model = SwinForImageClassification(cfg)
    model.swin.load_state_dict(base.state_dict(), strict=False)
    model.save_pretrained(d)
    processor.save_pretrained(d)


if __name__ == "__main__":
    swin()
