"""The Pretrained panel's "chat template" checkbox: only for a decoder with a template; checked, the
model reads the text in its template (the ids of transformers' apply_chat_template)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import ModelViewPanel  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data" / "checkpoints"
WAIT_MS = 30000


def make_panel(qtbot):
    panel = ModelViewPanel(AppContext(Session(build_demo("river-bank"))), auto_load=False)
    qtbot.addWidget(panel)
    panel.resize(1200, 760)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def load(qtbot, panel, folder):
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.load_model(folder)
    return blocker.args[0]


def test_checkbox_runs_the_text_in_the_chat_template(qtbot):
    with np.load(DATA / "tiny_qwen2" / "golden_chat.npz") as z:
        g = {k: z[k] for k in z.files}
    panel = make_panel(qtbot)
    panel.set_text(str(g["text"]))
    plain = load(qtbot, panel, DATA / "tiny_qwen2")
    assert panel.chat_box.isVisible() and not panel.chat_box.isChecked()
    assert "chat_template.jinja" in panel.chat_box.toolTip()
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.chat_box.setChecked(True)  # toggling runs the model again
    chat = blocker.args[0]
    assert len(chat.ids) > len(plain.ids) and chat.tokens[0] == "<|im_start|>"
    assert "tokens in the chat template, every map held" in panel.describe.text()
    np.testing.assert_array_equal(chat.ids, g["input_ids"])
    np.testing.assert_allclose(chat.attentions, g["attentions"], atol=1e-5, rtol=0)
    load(qtbot, panel, DATA / "tiny_qwen3")  # no template: no box, plain text
    assert not panel.chat_box.isVisible() and not panel.chat_box.wanted()


def test_a_template_that_fails_is_a_message_in_the_window(qtbot, tmp_path):
    d = tmp_path / "ck"
    shutil.copytree(DATA / "tiny_qwen2", d)
    (d / "chat_template.jinja").write_text("{{ raise_exception('system turns only') }}")
    panel = make_panel(qtbot)
    load(qtbot, panel, d)
    with qtbot.waitSignal(panel.failed, timeout=WAIT_MS) as blocker:
        panel.chat_box.setChecked(True)
    assert "the chat template (chat_template.jinja) refused the input: system turns only" in blocker.args[0]
    assert panel.message.isVisible() and "Traceback" not in panel.message.text()
