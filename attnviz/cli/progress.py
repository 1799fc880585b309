"""The command line's progress bar over documents (``attnviz-cli corpus``, ``model sweep``), drawn by tqdm: on a
terminal redrawn in place, into a log file or pipe a line every few seconds (tqdm's carriage returns made
newlines), and the failed documents in the bar's postfix.

Callers hand it a progress record with ``done``, ``total``, ``elapsed`` and ``failed`` (the corpus run's and
the sweep's ``Progress``) as often as they like; tqdm decides when to draw.
"""

from __future__ import annotations

import sys

FORMAT = "{desc}{n_fmt}/{total_fmt} documents {percentage:3.0f}% |{bar:24}| {rate_fmt} {elapsed} elapsed, " \
         "{remaining} left{postfix}"


class _Lines:
    """A file for tqdm that is no terminal: each redraw becomes a line of its own."""

    def __init__(self, stream):
        self.stream = stream
        self._last = None

    def write(self, text: str) -> None:
        text = text.replace("\r", "").replace("\x1b[A", "").rstrip()  # tqdm pads a shorter redraw with spaces
        key = (text.split("|")[0], text.rsplit(" left", 1)[-1])  # documents done and failed, not the rate
        if text.strip() and key != self._last:  # closing redraws the last state: not twice
            self._last = key
            self.stream.write(text + "\n")

    def flush(self) -> None:
        self.stream.flush()


class DocumentBar:
    """Documents done, rate and time left on ``stream`` (default: the stderr of the call)."""

    def __init__(self, stream=None, desc: str = "", interval: float = 5.0):
        self.stream = sys.stderr if stream is None else stream
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval = 0.2 if self.tty else interval
        self.desc = desc
        self._bar = None
        self._failed = 0

    def __call__(self, p) -> None:
        from tqdm import tqdm

        if self._bar is None:
            self._bar = tqdm(total=int(p.total), desc=self.desc, unit=" docs", bar_format=FORMAT, leave=True,
                             file=self.stream if self.tty else _Lines(self.stream), mininterval=self.interval,
                             maxinterval=max(self.interval, 10.0), dynamic_ncols=self.tty, ascii=not self.tty)
        if p.failed != self._failed:
            self._failed = int(p.failed)
            self._bar.set_postfix_str(f"{p.failed:,} failed", refresh=False)
        step = int(p.done) - self._bar.n
        if step > 0:
            self._bar.update(step)
        if p.done >= p.total:
            self.end()

    def end(self) -> None:
        """Draw the last state and close the bar (a Ctrl+C or an error leaves it where it was)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
