"""One cancellation: every layer raises and catches attnviz.cancel.Cancelled, so a stop in a checkpoint's pass,
the compute plan or a window job is the same exception and no layer has to translate another's."""

from __future__ import annotations

import re
from pathlib import Path

from attnviz.cancel import Cancelled

PACKAGE = Path(__file__).resolve().parents[1] / "attnviz"


def test_nothing_else_defines_a_cancellation():
    found = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
             if re.search(r"^class \w*Cancel\w*\(", p.read_text(encoding="utf-8"), re.M)]
    assert found == ["cancel.py"], found


def test_the_layers_share_it():
    from attnviz.checkpoints import seq2seq_study
    from attnviz.model import compute
    from attnviz.ui import latest_job

    assert compute.Cancelled is latest_job.Cancelled is seq2seq_study.Cancelled is Cancelled
