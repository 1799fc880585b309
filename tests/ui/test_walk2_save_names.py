"""Save and export dialogs offer a file name: the session file's name, else the demo's (the one the
window started with, or chose from File ▸ New from demo), else "untitled" — with the extension of
what is written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from attnviz.model.demos import build_demo
from attnviz.model.session import Session
from attnviz.persist import AutosaveStore
from attnviz.ui.context import AppContext
from attnviz.ui.file_actions import Prompts
from attnviz.ui.settings import AppSettings


class Offered(Prompts):
    """Records the file names the save dialogs offer; answers with the next of ``answers`` (None: cancel)."""

    def __init__(self):
        self.offered: list[str] = []
        self.answers: list = []

    def save_file(self, parent, caption, filters, suggested=""):
        self.offered.append(suggested)
        return self.answers.pop(0) if self.answers else None

    def save_changes(self, parent, what):
        return "discard"


@pytest.fixture
def window(qtbot, tmp_path):
    from attnviz.ui.main_window import MainWindow
    from attnviz.ui.panels import PANELS

    ctx = AppContext(Session(build_demo("river-bank")))
    specs = [s for s in PANELS if s.id in ("inputs", "model", "heatmap", "mask_designer")]
    w = MainWindow(ctx, settings=AppSettings(tmp_path / "settings.ini"), autosave=AutosaveStore(tmp_path / "data"),
                   prompts=Offered(), panels=specs)
    qtbot.addWidget(w)
    w.resize(1024, 700)
    w.show()
    yield w
    w.close()
    ctx.compute.shutdown(timeout=5)


def _respond(qtbot, ctx):
    with qtbot.waitSignal(ctx.response_changed, timeout=30000):
        ctx.recompute(now=True)


def test_save_and_export_offer_the_demos_then_the_sessions_name(qtbot, window, tmp_path):
    files, prompts = window.files, window.files.prompts
    assert files.new_session("vla-mask")
    _respond(qtbot, window.ctx)
    assert not files.save_as()  # cancelled: nothing written
    assert Path(prompts.offered[-1]).name == "vla-mask.attnviz"
    assert not files.export_png(scale=1.0)
    assert Path(prompts.offered[-1]).name == "vla-mask.png"
    assert not files.export_svg()
    assert Path(prompts.offered[-1]).name == "vla-mask.svg"
    assert not files.export_csv()
    name = Path(prompts.offered[-1]).name
    assert name.startswith("vla-mask-") and name.endswith(".csv")  # and which matrix it is

    mine = tmp_path / "my study.attnviz"
    prompts.answers = [str(mine)]
    assert files.save_as() and mine.exists()
    assert not files.save_as()
    assert prompts.offered[-1] == str(mine)
    assert not files.export_npy()
    name = Path(prompts.offered[-1]).name
    assert name.startswith("my study-") and name.endswith(".npy")
    assert Path(prompts.offered[-1]).parent == tmp_path  # in the folder last saved to

    dialog = window.panel("mask_designer").open_code_dialog()
    assert dialog.suggested_name("json") == "my study_mask.json"
    assert dialog.suggested_name("flex") == "my_study_mask_mod.py"  # a module name Python can import
    dialog.close()

    assert files.new_session()  # an empty session has neither file nor demo
    assert not files.save_as()
    assert Path(prompts.offered[-1]).name == "untitled.attnviz"


def test_the_window_offers_the_name_of_the_demo_it_started_with(tmp_path):
    out = tmp_path / "shot.png"
    code = ("import sys\nfrom attnviz.ui.app import main\n"
            "def prepare(app, window):\n    print('offered:', window.files.suggested_stem(), flush=True)\n"
            f"sys.exit(main(['--demo', 'savings-bank', '--size', '1024x700', '--screenshot', {str(out)!r}], "
            "on_shown=prepare))\n")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_DATA_HOME=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "offered: savings-bank" in proc.stdout
