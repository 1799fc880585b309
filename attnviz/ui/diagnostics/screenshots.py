"""Screenshots of the inspector and of every diagnostics tab, for the documentation:
``python -m attnviz.ui.diagnostics.screenshots docs/screenshots/diagnostics``.

Each view is opened on the demo that shows it best (seed 002's river bank for the breakdown, seed
001's translation for the alignment table ...), waits for the computation and for its background
study, and is saved with ``QWidget.grab``. Offscreen Qt is enough.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

#: (file name, demo, what to show) — the views the documentation pictures
VIEWS = (
    ("inspector_river_bank.png", "river-bank", ("inspector", 0)),
    ("inspector_weights_river_bank.png", "river-bank", ("inspector", 1)),
    ("inspector_pca_river_bank.png", "river-bank", ("inspector", 2)),
    ("inspector_translation.png", "translation", ("inspector", 0)),
    ("inspector_pca_vla.png", "vla-mask", ("inspector", 2)),
    ("normalisation_scaled.png", "river-bank", ("NormalisationTab", "scaled")),
    ("normalisation_unscaled.png", "river-bank", ("NormalisationTab", "unscaled")),
    ("normalisation_uniform.png", "river-bank", ("NormalisationTab", "uniform")),
    ("jacobian.png", "vla-mask", ("JacobianTab", None)),
    ("positional_sinusoidal.png", "vla-mask", ("PositionalTab", 0)),
    ("positional_rope.png", "vla-mask", ("PositionalTab", 1)),
    ("permutation.png", "river-bank", ("PermutationTab", None)),
    ("permutation_translation.png", "translation", ("PermutationTab", None)),
    ("flash_check.png", "vla-mask", ("FlashCheckTab", None)),
    ("alignment_translation.png", "translation", ("AlignmentTab", None)),
    ("variants.png", "river-bank", ("VariantsTab", None)),
)


def _spin(app, seconds: float):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)


def _wait(app, done, timeout: float = 120.0):
    end = time.monotonic() + timeout
    while not done() and time.monotonic() < end:
        _spin(app, 0.05)
    _spin(app, 0.3)


def save_screenshots(out_dir, views=VIEWS, size=(1400, 820)) -> list[Path]:
    """Render ``views`` into PNG files in ``out_dir``; returns the paths written."""
    from PySide6.QtWidgets import QApplication

    from attnviz.model.demos import build_demo
    from attnviz.model.session import Session
    from attnviz.ui.context import AppContext
    from attnviz.ui.panels.diagnostics_panel import TAB_TYPES, DiagnosticsPanel
    from attnviz.ui.panels.inspector_panel import InspectorPanel

    app = QApplication.instance() or QApplication([])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    by_name = {cls.__name__: cls for cls in TAB_TYPES}
    written = []
    for name, demo, (what, arg) in views:
        ctx = AppContext(Session(build_demo(demo)))
        widget = InspectorPanel(ctx) if what == "inspector" else DiagnosticsPanel(ctx)
        widget.resize(*size)
        widget.show()
        ctx.recompute(now=True)
        _wait(app, lambda: ctx.response is not None)
        if what == "inspector":
            widget.matrices.setCurrentIndex(arg)
        else:
            tab = widget.show_tab(by_name[what])
            if what == "NormalisationTab":
                ctx.set_view(normalisation=arg)
            elif what == "PositionalTab":
                tab.positions.setValue(96)
                tab.pages.setCurrentIndex(arg)
            elif what == "FlashCheckTab":
                tab.run()
            _spin(app, 0.2)
            job = getattr(tab, "job", None)
            if job is not None:
                _wait(app, lambda: not job.busy)
        _spin(app, 0.3)
        path = out / name
        widget.grab().save(str(path))
        written.append(path)
        ctx.compute.shutdown()
        widget.close()
        widget.deleteLater()
        ctx.deleteLater()
        _spin(app, 0.05)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", help="folder for the PNG files")
    args = parser.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    for p in save_screenshots(args.out_dir):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
