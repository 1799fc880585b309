"""Draw attnviz's bundled demo images (original synthetic pictures) with Pillow.

    .venv/bin/python tools/make_demo_images.py           # rewrites resources/images/*.png
    .venv/bin/python tools/make_demo_images.py --check   # exits 1 if a shipped image differs

* ``river-scene.png`` (224 x 224, a 14 x 14 grid of 16-pixel patches): a sky, a sun, hills, a river
  winding toward the viewer and a tree on its bank.
* ``harbour-wide.png`` (320 x 192, a 20 x 12 grid, non-square): a harbour with a lighthouse, a
  jetty and two boats under an evening sky.

Only deterministic drawing (gradients, polygons, ellipses) is used, so the files are reproduced
byte for byte.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "resources" / "images"


def _vertical_gradient(w: int, h: int, top, bottom) -> Image.Image:
    t = np.linspace(0.0, 1.0, h)[:, None, None]  # (h, 1, 1)
    rows = (1 - t) * np.asarray(top, float) + t * np.asarray(bottom, float)  # (h, 1, 3)
    img = np.broadcast_to(rows, (h, w, 3))  # (h, w, 3)
    return Image.fromarray(np.rint(img).astype(np.uint8))


def river_scene() -> Image.Image:
    """224 x 224: sun, hills, a river and a tree on the bank."""
    W = H = 224
    im = _vertical_gradient(W, H, (110, 170, 235), (200, 228, 250))
    d = ImageDraw.Draw(im)
    d.ellipse((150, 22, 194, 66), fill=(255, 214, 90))  # the sun
    d.ellipse((160, 32, 184, 56), fill=(255, 236, 150))
    d.polygon([(0, 120), (40, 84), (90, 110), (140, 78), (200, 104), (224, 92), (224, 224), (0, 224)], fill=(92, 150, 88))
    d.polygon([(0, 140), (60, 118), (130, 136), (224, 120), (224, 224), (0, 224)], fill=(120, 178, 96))
    # the river: narrow in the distance, wide at the bottom, with a bend
    left = [(104, 128), (96, 150), (78, 172), (66, 196), (40, 224)]
    right = [(116, 128), (122, 150), (118, 172), (132, 196), (170, 224)]
    d.polygon(left + right[::-1], fill=(64, 120, 200))
    for y, (x0, x1) in zip((150, 170, 190, 208), ((100, 112), (88, 104), (84, 102), (70, 96))):
        d.line((x0, y, x1, y), fill=(180, 215, 245), width=2)  # glints on the water
    d.line(left, fill=(120, 96, 60), width=3)  # the muddy river banks
    d.line(right, fill=(120, 96, 60), width=3)
    # the tree on the right bank
    d.rectangle((168, 136, 178, 182), fill=(110, 72, 40))
    d.ellipse((146, 96, 200, 146), fill=(40, 110, 50))
    d.ellipse((154, 86, 190, 120), fill=(56, 132, 62))
    # a small house on the far hill
    d.rectangle((34, 104, 54, 118), fill=(236, 228, 210))
    d.polygon([(31, 104), (44, 94), (57, 104)], fill=(170, 60, 50))
    return im


def harbour_wide() -> Image.Image:
    """320 x 192: a harbour at evening with a lighthouse, a jetty and two boats."""
    W, H = 320, 192
    im = _vertical_gradient(W, H, (60, 70, 140), (250, 170, 110))
    d = ImageDraw.Draw(im)
    sea = _vertical_gradient(W, 80, (40, 80, 130), (20, 40, 80))
    d.ellipse((40, 82, 80, 122), fill=(255, 200, 120))  # the setting sun ...
    im.paste(sea, (0, 112))  # ... half under the horizon
    for x in range(44, 80, 6):
        d.line((x, 116, x + 3, 116), fill=(255, 200, 120), width=1)  # its reflection
    # the breakwater and the lighthouse
    d.polygon([(200, 112), (320, 100), (320, 124), (200, 118)], fill=(90, 80, 75))
    d.rectangle((270, 40, 286, 104), fill=(240, 240, 235))
    for y in (52, 72, 92):
        d.rectangle((270, y, 286, y + 8), fill=(200, 50, 50))
    d.polygon([(266, 40), (278, 26), (290, 40)], fill=(60, 60, 60))
    d.rectangle((272, 30, 284, 40), fill=(255, 240, 150))  # the lamp
    # a wooden jetty and two boats
    d.rectangle((0, 140, 120, 146), fill=(130, 95, 60))
    for x in range(8, 120, 22):
        d.rectangle((x, 146, x + 4, 170), fill=(100, 70, 45))
    d.polygon([(140, 150), (196, 150), (186, 162), (150, 162)], fill=(40, 90, 170))
    d.line((168, 150, 168, 118), fill=(230, 230, 230), width=2)
    d.polygon([(170, 120), (170, 148), (190, 148)], fill=(245, 245, 240))
    d.polygon([(214, 166), (256, 166), (248, 176), (220, 176)], fill=(200, 70, 50))
    return im


IMAGES = {"river-scene.png": river_scene, "harbour-wide.png": harbour_wide}


def png_bytes(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument("--check", action="store_true", help="compare with the existing files instead of writing")
    args = parser.parse_args(argv)
    status = 0
    for name, draw in IMAGES.items():
        data = png_bytes(draw())
        path = args.out / name
        if args.check:
            same = path.is_file() and path.read_bytes() == data
            print(f"{path}: {'up to date' if same else 'DIFFERS'}")
            status |= 0 if same else 1
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            print(f"wrote {path} ({len(data)} bytes)")
    return status


if __name__ == "__main__":
    sys.exit(main())
