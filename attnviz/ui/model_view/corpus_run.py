"""CorpusRun: the corpus statistics of ``attnviz-cli corpus`` run from the window, off the GUI thread.

One :class:`~attnviz.ui.latest_job.LatestJob` runs :func:`attnviz.corpus.run.run_corpus` for the loaded
checkpoint on the local ``threads`` scheduler with one worker (the window keeps a core), one document
per partition so that Cancel is heard after each document. ``progress`` carries the documents done;
``finished(result, out)`` comes once the STATS file is written, ``failed(message)`` when the run could
not start or no document ran (no texts, every document bad), ``stopped()`` after Cancel (nothing is
written: the run's files are discarded).
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from attnviz.cancel import Cancelled
from attnviz.ui.latest_job import LatestJob

#: local worker threads of a run from the window (the window keeps the other core)
WORKERS = 1
#: documents per partition: Cancel is asked after each one
BATCH = 1
MEMORY_MESSAGE = "not enough memory for the corpus run: use shorter documents or a smaller model"


class _Relay(QObject):
    moved = Signal(int, object)  # (run number, Progress) from the worker thread


def suggested_output(texts, model_name: str) -> Path:
    """Where the save dialog first proposes the STATS file: beside the corpus, named after the model."""
    p = Path(texts)
    return p.parent / f"{model_name}-stats.parquet"


class CorpusRun(QObject):
    progress = Signal(object)  # attnviz.corpus.run.Progress of the current run
    finished = Signal(object, object)  # (CorpusResult, Path of the STATS file written)
    failed = Signal(str)
    stopped = Signal()

    def __init__(self, parent=None, run=None):
        super().__init__(parent)
        self._run = run  # run_corpus, or a stand-in (tests)
        self.job = LatestJob("attnviz-corpus-run", self, memory_message=MEMORY_MESSAGE)
        self.job.done.connect(self._on_done)
        self.job.failed.connect(lambda _jid, msg: self._end(lambda: self.failed.emit(msg)))
        self._relay = _Relay(self)
        self._relay.moved.connect(self._on_moved)
        self._stop = threading.Event()
        self._number = 0
        self.running = False

    def start(self, folder, name: str | None, texts, out) -> int:
        """Run the statistics of ``texts`` through the checkpoint in ``folder``, written to ``out``."""
        self._stop.set()  # a run still going stops at its next document
        stop = self._stop = threading.Event()
        self._number += 1
        number, relay = self._number, self._relay
        run = self._run
        if run is None:
            from attnviz.corpus.run import run_corpus as run

        def progress(p) -> None:
            if stop.is_set():
                raise Cancelled  # run_corpus discards its files on the way out
            relay.moved.emit(number, p)

        def job():
            result = run(str(folder), name, Path(texts), Path(out), scheduler="threads", workers=WORKERS,
                         batch=BATCH, progress=progress)
            if stop.is_set():
                raise Cancelled
            return result, Path(out)

        self.running = True
        return self.job.submit(job)

    def cancel(self) -> None:
        """Stop the run after the document it is on; nothing is delivered and ``stopped`` is emitted."""
        if not self.running:
            return
        self._stop.set()
        self.job.cancel()
        self._end(self.stopped.emit)

    def shutdown(self) -> None:
        self._stop.set()
        self.job.shutdown()

    def _on_moved(self, number: int, p) -> None:
        if number == self._number and self.running:
            self.progress.emit(p)

    def _on_done(self, _jid: int, payload) -> None:
        result, out = payload
        self._end(lambda: self.finished.emit(result, out))

    def _end(self, emit) -> None:
        self.running = False
        emit()
