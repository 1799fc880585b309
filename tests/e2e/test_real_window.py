"""The real application in a real X window (Xvfb): it starts on the river-bank demo, an image is
loaded as a person would add one, the heatmap on screen changes, and a screenshot of the window as
the X server shows it is kept in the test artifacts folder (tests/e2e/conftest.py: ARTIFACTS)."""

from __future__ import annotations

import pytest

from attnviz.sources.image import bundled_image

pytestmark = pytest.mark.xvfb

LOAD_IMAGE = """
import os
import numpy as np
from PySide6.QtGui import QImage

def pixels(widget):
    img = widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    a = np.frombuffer(img.constBits(), dtype=np.uint8, count=img.sizeInBytes())
    return a.reshape(img.height(), img.bytesPerLine() // 4, 4)[:, : img.width(), :3].copy()

first = wait_response(120)
wait(700)
heat = window.panel("heatmap")
before = pixels(heat.heatmap)
window.files.add_file(IMAGE)
resp = wait_response(120)
window.show_workspace("attention")  # the heatmap draws when its workspace shows (adding an image may show another)
wait(1200)
after = pixels(heat.heatmap)
changed = float(np.mean(np.any(before != after, axis=-1))) if before.shape == after.shape else 1.0
shot = os.path.join(os.environ["ARTIFACTS"], "e2e_image_loaded.png")
screen = app.primaryScreen()
screen.grabWindow(window.winId()).save(shot)  # the pixels the X server holds for the window
report({"platform": app.platformName(), "visible": window.isVisible(), "T_before": first.Tq, "T_after": resp.Tq,
        "ok": resp.ok, "changed": changed, "mode": heat.mode, "shot": shot,
        "sources": [s.name for s in ctx.session.state.sources],
        "image_overlay": None if window.panel("image").overlay_weights() is None
                         else list(window.panel("image").overlay_weights().shape),
        "screen": [screen.size().width(), screen.size().height()]})
quit(0)
"""


def test_loading_an_image_changes_the_heatmap_in_a_real_window(run_app):
    proc, rep = run_app(script=LOAD_IMAGE.replace("IMAGE", repr(str(bundled_image("river-scene.png")))))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert rep is not None, proc.stderr[-3000:]
    assert rep["platform"] == "xcb" and rep["visible"] and rep["screen"] == [1600, 1000]
    assert rep["ok"] and rep["T_before"] == 4 and rep["T_after"] == 4 + 1 + 14 * 14
    assert rep["sources"] == ["by the river bank", "river-scene"]
    assert rep["changed"] > 0.2  # a 4x4 matrix became a 201x201 one
    assert rep["image_overlay"] == [14, 14]
    from PySide6.QtGui import QImage

    shot = QImage(rep["shot"])
    assert not shot.isNull() and shot.width() > 800 and shot.height() > 500
    assert "Traceback" not in proc.stderr
