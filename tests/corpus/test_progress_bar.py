"""The command line's document bar is tqdm's: a line per redraw into a file (no carriage returns), the failed
documents in its postfix, the last state once; on a terminal tqdm redraws in place."""

import io
from types import SimpleNamespace

from attnviz.cli.progress import DocumentBar


class _Tty(io.StringIO):
    def isatty(self):
        return True


def _feed(bar, total=10, failed_from=6):
    for done in range(total + 1):
        bar(SimpleNamespace(done=done, total=total, elapsed=done * 0.1, failed=1 if done >= failed_from else 0))


def test_into_a_file_every_redraw_is_a_line_and_the_last_one_is_written_once():
    out = io.StringIO()
    _feed(DocumentBar(out, desc="sweep: ", interval=0))
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines[-1].startswith("sweep: 10/10 documents 100%") and lines[-1].endswith(", 1 failed")
    assert sum(line.startswith("sweep: 10/10 documents") for line in lines) == 1
    assert "docs/s" in lines[-1] and "failed" not in lines[1]


def test_on_a_terminal_the_bar_is_redrawn_in_place():
    out = _Tty()
    _feed(DocumentBar(out))
    text = out.getvalue()
    assert text.count("\r") >= 2 and text.endswith("\n")
    assert "10/10 documents 100%" in text.rsplit("\r", 1)[-1]
