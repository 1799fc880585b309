"""A download's progress as huggingface_hub reports it, for a window's own bar, and its Cancel.

``snapshot_download(tqdm_class=...)`` makes its progress bars from the class it is given (bytes written, files
fetched) and calls their ``update`` from its download threads. :meth:`DownloadProgress.bar_class` is such a
class: it draws nothing, keeps the counts, and once :meth:`DownloadProgress.stop` was called every ``update``
raises :class:`~attnviz.cancel.Cancelled`, which ends each running file download at its next chunk (the
library passes the exception up; what arrived stays in the cache, and a new fetch resumes it). Qt-free: the
window reads :meth:`DownloadProgress.snapshot` on a timer.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from attnviz.cancel import Cancelled


@dataclass(frozen=True)
class Snapshot:
    """The counts at one moment: bytes written of the bytes announced, files done of the files to fetch."""

    bytes_done: int = 0
    bytes_total: int = 0  # 0 while no file's size is known
    files_done: int = 0
    files_total: int = 0  # 0 before the library has listed the files
    started: bool = False  # a bar exists: the Hub answered and the library is fetching


class DownloadProgress:
    """The bars of one download (thread-safe) and its stop flag."""

    def __init__(self):
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._bars: list[_Bar] = []

    def reset(self) -> None:
        """Forget the bars and clear the stop flag, before a new download."""
        with self._lock:
            self._bars = []
        self._stop.clear()

    def stop(self, *_args) -> None:
        """Make every later ``update`` raise Cancelled (Cancel; the window closing)."""
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def check(self) -> None:
        if self._stop.is_set():
            raise Cancelled()

    def bar_class(self) -> type:
        """A tqdm-like class whose bars report to this object (``fetch_model(tqdm_class=...)``)."""
        progress = self
        return type("HubProgressBar", (_Bar,), {"progress": progress})

    def _add(self, bar: _Bar) -> None:
        with self._lock:
            self._bars.append(bar)

    def snapshot(self) -> Snapshot:
        """Bytes from the newest bar counting bytes (huggingface_hub 2.x makes a network-transfer bar, then the
        bar of the bytes written, which grows as each file's size becomes known); files from the newest bar
        counting items with a total."""
        with self._lock:
            bars = list(self._bars)
        byte_bars = [b for b in bars if b.unit == "B"]
        file_bars = [b for b in bars if b.unit != "B" and b.total]
        out = {"started": bool(bars)}
        if byte_bars:
            b = byte_bars[-1]
            out |= {"bytes_done": max(0, int(b.n)), "bytes_total": max(0, int(b.total or 0))}
        if file_bars:
            f = file_bars[-1]
            out |= {"files_done": max(0, int(f.n)), "files_total": int(f.total)}
        return Snapshot(**out)


class _Bar:
    """What huggingface_hub uses of a tqdm bar; its ``update`` is where a Cancel stops the download."""

    progress: DownloadProgress  # set by DownloadProgress.bar_class

    def __init__(self, iterable=None, *args, desc=None, total=None, initial=0, unit="it", **kwargs):
        self.iterable = iterable
        self.desc = desc or ""
        self.total = total
        self.n = initial or 0
        self.unit = unit
        self.postfix = ""
        self.disable = False
        self.progress.check()
        self.progress._add(self)

    def __iter__(self):
        for item in self.iterable or ():
            yield item
            self.update(1)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n=1) -> None:
        self.progress.check()
        self.n += n or 0

    def refresh(self, *args, **kwargs) -> None:
        self.progress.check()

    def reset(self, total=None) -> None:
        self.n = 0
        if total is not None:
            self.total = total

    def close(self) -> None:
        pass

    def clear(self, *args, **kwargs) -> None:
        pass

    def set_description(self, desc=None, refresh=True) -> None:
        self.desc = desc or ""

    set_description_str = set_description

    def set_postfix_str(self, s="", refresh=True) -> None:
        self.postfix = s

    def set_postfix(self, *args, **kwargs) -> None:
        pass

    @property
    def format_dict(self) -> dict:
        return {"n": self.n, "total": self.total, "rate": None, "unit": self.unit, "desc": self.desc}
