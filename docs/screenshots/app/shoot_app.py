"""Screenshots of the application window and of its own panels, taken from the real application.

Run it through the application's test-script hook in a real X window, e.g.::

    ATTNVIZ_TEST_SCRIPT=docs/screenshots/app/shoot_app.py \
        xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python -m attnviz

(it needs ``app``, ``window``, ``ctx``, ``wait`` and ``wait_response`` from the hook). It writes
``window_<demo>_<theme>.png`` for four demos in the light and dark themes, and one picture per panel,
next to this file.
"""

import os
from pathlib import Path

OUT = Path(os.environ.get("ATTNVIZ_SHOTS", Path(__file__).resolve().parent))
OUT.mkdir(parents=True, exist_ok=True)
window.files.prompts.save_changes = lambda *_a: "discard"  # noqa: F821 - names from the hook
window.resize(1440, 900)  # noqa: F821
wait(200)  # noqa: F821
window.reset_layout()  # noqa: F821
heat = window.panel("heatmap")  # noqa: F821


def settle(ms=900, respond=False):
    if respond:
        wait_response(180)  # noqa: F821
    heat.job.wait_idle(60)
    wait(ms)  # noqa: F821
    heat.job.wait_idle(60)
    wait(200)  # noqa: F821


def save(widget, name):
    widget.grab().save(str(OUT / f"{name}.png"))


def open_demo(name, query=None, head=None):
    window.files.new_session(name)  # noqa: F821
    settle(300, respond=True)
    changes = {}
    if query is not None:
        changes["query"] = query
    if head is not None:
        changes["head"] = head
    if changes:
        ctx.set_view(**changes)  # noqa: F821
    settle()


DEMOS = (("river-bank", 3, None), ("vit-image", 0, 1), ("vla-mask", 17, 1), ("long-context", 600, 0))
for theme in ("light", "dark"):
    window.set_theme(theme)  # noqa: F821
    for demo, query, head in DEMOS:
        if demo == "vit-image":
            window.docks["image"].raise_()  # noqa: F821
        open_demo(demo, query, head)
        if demo == "vla-mask":
            window.panel("inputs").select_source("prompt")  # noqa: F821
            wait(300)  # noqa: F821
        save(window, f"window_{demo}_{theme}")  # noqa: F821
window.set_theme("light")  # noqa: F821

# the application's own panels, one picture each
open_demo("vla-mask", 17, 1)
inputs = window.panel("inputs")  # noqa: F821
inputs.select_source("prompt")
wait(300)  # noqa: F821
save(window.docks["inputs"], "panel_inputs_text")  # noqa: F821
inputs.select_source("image")
wait(300)  # noqa: F821
save(window.docks["inputs"], "panel_inputs_image")  # noqa: F821
inputs.select_source("fast actions")
wait(300)  # noqa: F821
save(window.docks["inputs"], "panel_inputs_block")  # noqa: F821
save(window.docks["model"], "panel_model")  # noqa: F821
save(heat, "panel_heatmap_vla")
ctx.set_view(matrix="mask")  # noqa: F821
settle(400)
save(heat, "panel_heatmap_mask")
ctx.set_view(matrix="weights", log_scale=True, colormap="magma", head="mean")  # noqa: F821
settle(400)
save(heat, "panel_heatmap_log_mean")
ctx.set_view(log_scale=False, colormap="viridis")  # noqa: F821
open_demo("vit-image", 0, "mean")
window.docks["image"].raise_()  # noqa: F821
wait(300)  # noqa: F821
save(window.docks["image"], "panel_image_cls")  # noqa: F821
ctx.set_view(query=1 + 14 * 9 + 4)  # noqa: F821  a patch on the river
settle(300)
save(window.docks["image"], "panel_image_patch")  # noqa: F821
open_demo("long-context", 600, 0)
save(heat, "panel_heatmap_overview")
heat.heatmap.frame.view.setRange(xRange=(540, 660), yRange=(540, 660), padding=0)
settle(600)
save(heat, "panel_heatmap_overview_zoom")
quit(0)  # noqa: F821
