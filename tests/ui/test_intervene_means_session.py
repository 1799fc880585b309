"""The head means file of a mean ablation is part of the session: choosing it is one undo step, it is saved
with its size and digest, and reopening the session reads it again -- or says in one line that it is missing,
has changed, or holds another model's heads (the heads then take their mean over the positions)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")

from test_intervene_view import WAIT_MS, _sweep_file, changed, ckpt, panel  # noqa: E402,F401

from attnviz.checkpoints.interventions import Edit, run  # noqa: E402
from attnviz.model.state import Interventions  # noqa: E402
from attnviz.persist import load_session, save_session  # noqa: E402
from attnviz.ui.model_view.intervene_means import means_digest  # noqa: E402


def _means(ckpt, seed):
    c = ckpt.config
    return np.random.default_rng(seed).normal(size=(c.n_layer, c.n_head, c.decoder.head_dim))


def _reopen(qtbot, panel, path):
    view = panel.intervention
    with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS) as blocker:
        panel.ctx.session.replace_state(load_session(path))
    return blocker.args[0]


def test_the_means_file_is_an_undoable_session_edit_saved_and_read_again(panel, qtbot, tmp_path, ckpt):
    view = panel.intervention
    spec = Interventions(heads=((0, 1), (1, 3)), mode="mean")
    changed(qtbot, view, lambda: view.set_interventions(spec))
    means = _means(ckpt, 3)
    good = _sweep_file(tmp_path / "sweep.parquet", means)
    changed(qtbot, view, lambda: view.means_row.choose(good))
    mf = view.spec.means_file
    assert mf.path == str(good) and mf.size == good.stat().st_size and mf.digest == means_digest(means)
    ids = panel.outcome.result.decoder.ids
    ref = run(ckpt.config, ckpt.weights, ids, Edit(ablate={(0, 1): means[0, 1], (1, 3): means[1, 3]})).logits
    stack = panel.ctx.undo_stack
    assert stack.undoText() == "Take the head means from sweep.parquet"
    eff = changed(qtbot, view, stack.undo)
    assert view.spec == spec and view.means() is None and view.means_row.combo.currentData() == "positions"
    assert not np.array_equal(eff.after.logits, ref)
    eff = changed(qtbot, view, stack.redo)
    np.testing.assert_array_equal(eff.after.logits, ref)
    assert "corpus means (sweep.parquet)" in view.heads_line.text()
    # saved, then reopened: the file is read again and its means used
    path = save_session(tmp_path / "s.attnviz", panel.ctx.session.state)
    changed(qtbot, view, lambda: view.set_interventions(Interventions()))
    eff = _reopen(qtbot, panel, path)
    assert view.spec.means_file == mf and view.means() is not None and view.message_text() == ""
    np.testing.assert_array_equal(eff.after.logits, ref)


@pytest.mark.parametrize("change, said", [
    ("rewrite", "has changed since the session was saved (its head means differ)"),
    ("delete", "that the session names is missing"),
    ("other model", "they come from another model"),
])
def test_a_missing_or_changed_file_is_said_plainly_on_reopening(panel, qtbot, tmp_path, ckpt, change, said):
    view = panel.intervention
    changed(qtbot, view, lambda: view.set_interventions(Interventions(heads=((0, 1),), mode="mean")))
    good = _sweep_file(tmp_path / "sweep.parquet", _means(ckpt, 3))
    changed(qtbot, view, lambda: view.means_row.choose(good))
    path = save_session(tmp_path / "s.attnviz", panel.ctx.session.state)
    changed(qtbot, view, lambda: view.set_interventions(Interventions()))
    if change == "rewrite":
        _sweep_file(good, _means(ckpt, 4))
    elif change == "delete":
        good.unlink()
    else:
        _sweep_file(good, _means(ckpt, 3)[:, :2])
    with qtbot.waitSignal(view.failed, timeout=WAIT_MS) as blocker:
        eff = _reopen(qtbot, panel, path)
    assert said in blocker.args[0] and "\n" not in blocker.args[0]
    assert said in view.message_text()  # still said once the pass is drawn
    assert view.means() is None and view.spec.means_file is not None  # the session keeps what it named
    plain_mean = run(ckpt.config, ckpt.weights, panel.outcome.result.decoder.ids, Edit(ablate={(0, 1): "mean"}))
    np.testing.assert_array_equal(eff.after.logits, plain_mean.logits)
