"""Write tests/data/checkpoints/tiny_deit_crop: tiny_deit's weights with a DeiT-style processor that resizes to a
fixed size and then centre-crops (as the published DeiT processors do: 256, then 224), and a ``golden.npz``
of transformers' own processor and eager attention on a fixed picture.

    /path/to/venv/bin/python tools/make_crop_golden.py
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from transformers import AutoImageProcessor, DeiTModel

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "checkpoints"


def picture() -> np.ndarray:
    y, x = np.mgrid[0:57, 0:83]
    img = np.stack([x * 3 % 256, y * 4 % 256, (x * y) % 256], -1).astype(np.uint8)
    img[10:30, 20:50] = (250, 30, 30)
    return img


def main() -> None:
    src, dst = DATA / "tiny_deit", DATA / "tiny_deit_crop"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    pp = json.loads((dst / "preprocessor_config.json").read_text())
    pp.update(image_processor_type="DeiTImageProcessor", size={"height": 32, "width": 48}, do_center_crop=True,
              crop_size={"height": 24, "width": 40}, resample=3)
    (dst / "preprocessor_config.json").write_text(json.dumps(pp, indent=2))
    (dst / "golden.npz").unlink()
    proc = AutoImageProcessor.from_pretrained(dst)
    model = DeiTModel.from_pretrained(dst, attn_implementation="eager", add_pooling_layer=False).eval()
    img = picture()
    pv = proc(images=Image.fromarray(img), return_tensors="pt").pixel_values
    with torch.no_grad():
        out = model(pixel_values=pv, output_attentions=True)
    np.savez_compressed(dst / "golden.npz", image=img, pixel_values=pv[0].numpy().astype(np.float32),
                        attentions=torch.stack(out.attentions)[:, 0].numpy())
    print(dst, tuple(pv.shape), tuple(out.attentions[0].shape))


if __name__ == "__main__":
    main()
