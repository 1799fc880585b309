"""One vocabulary for messages: every ctx.report / notify / message.emit in the application passes a
messages.Level first and the text second, and a report reaches the status bar and the notice at its level."""

import ast
import pathlib

import pytest

from attnviz.ui.messages import Level

ROOT = pathlib.Path(__file__).resolve().parents[3] / "attnviz"


def _calls():
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                chain = ast.unparse(node.func.value)
                if (node.func.attr == "report" and "ctx" in chain) or node.func.attr == "notify" or \
                        (node.func.attr == "emit" and chain.endswith("message")):
                    yield path.relative_to(ROOT), node


def test_every_message_passes_a_level_then_its_text():
    calls = list(_calls())
    assert len(calls) > 40  # the scan finds the application's messages
    bad = [f"{p}:{n.lineno}: {ast.unparse(n)[:80]}" for p, n in calls
           if len(n.args) != 2 or not (ast.unparse(n.args[0]).startswith("Level.") or ast.unparse(n.args[0]) == "level"
                                       or ast.unparse(n.args[0]) == "Level(level)")]
    assert not bad, "\n".join(bad)


def test_a_level_is_its_name_and_a_bad_one_is_refused():
    assert Level.ERROR == "error" and str(Level.WARNING) == "warning" and Level("info") is Level.INFO
    with pytest.raises(ValueError):
        Level("loud")


def test_a_report_reaches_the_status_bar_and_the_notice(make_window):
    w = make_window("river-bank")
    ctx = w.ctx
    seen = []
    ctx.message.connect(lambda level, text: seen.append((level, text)))
    ctx.report(Level.ERROR, "cannot open x.png: not an image")
    assert seen == [(Level.ERROR, "cannot open x.png: not an image")] and seen[0][0] is Level.ERROR
    assert w.notice.level is Level.ERROR and w.notice.label.text() == "cannot open x.png: not an image"
    assert w.status.currentMessage() == "cannot open x.png: not an image"
    ctx.report(Level.INFO, "saved s.attnviz")
    assert w.status.currentMessage() == "saved s.attnviz"
