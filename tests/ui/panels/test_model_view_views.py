"""How the pretrained-model jobs report problems, and the head summary view on a tiny checkpoint's run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.checkpoints import CheckpointError, head_summaries, load_checkpoint, run_text  # noqa: E402
from attnviz.checkpoints.views import summary_matrix  # noqa: E402
from attnviz.ui.latest_job import run_job  # noqa: E402
from attnviz.ui.model_view.jobs import EXPECTED, MEMORY_MESSAGE  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data" / "checkpoints"


@pytest.fixture(scope="module")
def gpt2_run():
    return run_text(load_checkpoint(DATA / "tiny_gpt2"), "the river bank")


def test_run_job_turns_problems_into_messages(tmp_path):
    result, error = run_job(lambda: load_checkpoint(tmp_path / "nowhere"), EXPECTED, MEMORY_MESSAGE)
    assert result is None and "not found" in error
    result, error = run_job(lambda: (_ for _ in ()).throw(CheckpointError("bad config")), EXPECTED, MEMORY_MESSAGE)
    assert error == "bad config"
    result, error = run_job(lambda: 1 / 0, EXPECTED, MEMORY_MESSAGE)
    assert error.startswith("internal error: ZeroDivisionError")
    assert run_job(lambda: 42, EXPECTED, MEMORY_MESSAGE) == (42, None)


def test_summary_view_paints_alone_and_follows_its_statistic(qtbot, gpt2_run):
    from attnviz.ui.model_view.summary_view import HeadSummaryView

    view = HeadSummaryView()
    qtbot.addWidget(view)
    view.resize(420, 300)
    view.set_summaries(head_summaries(gpt2_run.attentions, special=gpt2_run.special))
    view.set_metric("previous")
    assert view.statistic() == "previous"
    np.testing.assert_array_equal(view.shown_matrix(), summary_matrix(view.summaries, "previous"))
    image = view.grab()  # painting asks QWidget.metric(): the view must not shadow it
    assert (image.width(), image.height()) == (420, 300)
