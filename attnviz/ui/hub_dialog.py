"""File ▸ Open from Hugging Face…: open a model already in the local hub cache, or download one by its repo id.

The dialog lists the models the hub cache holds (:func:`~attnviz.checkpoints.hub_cache.cached_models`, read
from disk only); **Open** shows the chosen one in the Pretrained workspace without any network. Nothing is
downloaded until the person presses **Download**: then :func:`~attnviz.checkpoints.hub_fetch.fetch_model` runs
on a :class:`~attnviz.ui.latest_job.LatestJob` thread with a :class:`~attnviz.ui.hub_progress.DownloadProgress`
as its progress bars, read by a timer into the dialog's bar; **Cancel** stops it at the next chunk and opens
nothing. Offline, an unknown, gated or private repo, or a repo that is no checkpoint is one line in the dialog.
Without huggingface_hub (the desktop bundle leaves it out) the cache is still listed and Open works; Download
says what to install.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
)

from attnviz.cancel import Cancelled
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.hub_cache import FoundCheckpoint, cache_dir, cached_models, describe_folder
from attnviz.ui.hub_progress import DownloadProgress, Snapshot
from attnviz.ui.latest_job import LatestJob
from attnviz.ui.messages import Level

NEEDS_HUB = ("downloading needs the huggingface_hub library, which this installation leaves out: "
             "pip install huggingface_hub (the models already in the cache open without it)")
BAD_ID = "type the model's repo id as ORG/NAME, e.g. openai-community/gpt2"
POLL_MS = 100
_CANCELLED = object()  # what a download stopped by Cancel returns


def hub_import_problem() -> str | None:
    """None when huggingface_hub imports; else the line saying what to install (the desktop bundle)."""
    try:
        import huggingface_hub  # noqa: F401
    except ImportError as exc:
        name = getattr(exc, "name", None) or ""
        return NEEDS_HUB if name.startswith("huggingface_hub") or not name else f"{NEEDS_HUB} ({exc})"
    return None


def offline_set() -> bool:
    """Whether HF_HUB_OFFLINE is set (the library's reading when it is there, the variable otherwise)."""
    try:
        from attnviz.checkpoints.hub_fetch import offline_mode

        return offline_mode()
    except ImportError:
        return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def size_text(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def progress_text(s: Snapshot) -> str:
    """``12.3 MB of 40.0 MB · 2 of 9 files`` (what is known so far)."""
    parts = []
    if s.bytes_total:
        parts.append(f"{size_text(s.bytes_done)} of {size_text(s.bytes_total)}")
    elif s.bytes_done:
        parts.append(size_text(s.bytes_done))
    if s.files_total:
        parts.append(f"{s.files_done} of {s.files_total} files")
    return " · ".join(parts) if parts else "asking the Hub for the files…"


def _params(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}"


def openable(found: FoundCheckpoint | None) -> bool:
    """A cached checkpoint the Pretrained workspace can load: a family attnviz runs, its weights there."""
    return found is not None and found.supported and not found.note


def cache_entry_text(found: FoundCheckpoint) -> str:
    text = f"{found.name}  —  {found.family}"
    if found.n_params:
        text += f", {_params(found.n_params)} weights, {found.dtype or '?'}"
    if not openable(found):
        text += f"  ({found.note or 'attnviz does not run this family'})"
    return text


def bar_permille(s: Snapshot, shown: int) -> int | None:
    """The bar's position in thousandths, never below ``shown``: the library announces each file's size when
    that file starts, so the bytes announced grow during a download and a plain ratio would move the bar back.
    The text under the bar keeps the true counts. None while neither bytes nor files are known (busy)."""
    if s.bytes_total:
        value = round(1000 * s.bytes_done / s.bytes_total)
    elif s.files_total:
        value = round(1000 * s.files_done / s.files_total)
    else:
        return None
    return max(shown, min(1000, value))


def fetch_job(repo_id: str, revision: str | None, progress: DownloadProgress):
    """Download on the worker thread; the checkpoint's description, or _CANCELLED after Cancel."""
    from attnviz.checkpoints.hub_fetch import fetch_model

    try:
        folder = fetch_model(repo_id, revision, tqdm_class=progress.bar_class())
    except Cancelled:
        return _CANCELLED
    except ImportError as exc:
        raise CheckpointError(NEEDS_HUB if (getattr(exc, "name", "") or "").startswith("huggingface_hub")
                              else f"{NEEDS_HUB} ({exc})") from None
    except CheckpointError:
        if progress.stopped:
            return _CANCELLED
        raise
    return describe_folder(folder, repo_id, "cache")


class HubDialog(QDialog):
    """Repo id and revision fields, the cache's models, a progress bar; ``on_open(folder, name)`` shows a model."""

    def __init__(self, on_open: Callable[[Path, str], object], parent=None, *, cache: Path | None = None):
        super().__init__(parent)
        self.setWindowTitle("Open from Hugging Face")
        self._on_open = on_open
        self._cache = cache
        self._found: dict[str, FoundCheckpoint] = {}
        self._downloading: str | None = None  # the repo id being fetched
        self.progress = DownloadProgress()
        self.destroyed.connect(self.progress.stop)  # the window closing stops a download
        self.job = LatestJob("attnviz-hub-fetch", self, expected=(CheckpointError, OSError, ValueError))
        self.job.done.connect(self._on_done)
        self.job.failed.connect(self._on_failed)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._show_progress)

        intro = QLabel("Open a model from the local Hugging Face cache, or download one by its repo id. Only "
                       "the files attnviz reads are fetched (config, tokenizer and processor files, safetensors "
                       "weights); the token is huggingface_hub's (HF_TOKEN, or <tt>hf auth login</tt>).", self)
        intro.setWordWrap(True)
        self.repo_edit = QLineEdit(self)
        self.repo_edit.setPlaceholderText("ORG/NAME, e.g. openai-community/gpt2")
        self.repo_edit.textChanged.connect(self._update_buttons)
        self.revision_edit = QLineEdit(self)
        self.revision_edit.setPlaceholderText("main (a branch, tag or commit; for Download)")
        form = QFormLayout()
        repo_label = QLabel("&Repo id:", self)
        repo_label.setBuddy(self.repo_edit)
        rev_label = QLabel("Re&vision:", self)
        rev_label.setBuddy(self.revision_edit)
        form.addRow(repo_label, self.repo_edit)
        form.addRow(rev_label, self.revision_edit)

        self.cache_list = QListWidget(self)
        self.cache_list.currentItemChanged.connect(self._on_pick)
        self.cache_list.itemActivated.connect(lambda _item: self.open_cached())
        self.cache_label = QLabel(self)
        self.cache_label.setBuddy(self.cache_list)
        self.cache_label.setWordWrap(True)

        self.message = QLabel(self)
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        self.bar_text = QLabel(self)
        self.bar.hide()
        self.bar_text.hide()

        self.open_button = QPushButton("&Open", self)
        self.open_button.setToolTip("show the cached copy in the Pretrained workspace (no network)")
        self.open_button.clicked.connect(self.open_cached)
        self.download_button = QPushButton("&Download", self)
        self.download_button.setToolTip("fetch the repo id at the revision into the cache, then open it")
        self.download_button.clicked.connect(self.download)
        self.cancel_button = QPushButton("&Cancel", self)
        self.cancel_button.setToolTip("stop the download (what arrived stays in the cache); close when none runs")
        self.cancel_button.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for b in (self.open_button, self.download_button, self.cancel_button):
            b.setAutoDefault(False)
            buttons.addWidget(b)

        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(self.cache_label)
        layout.addWidget(self.cache_list, 1)
        layout.addWidget(self.bar)
        layout.addWidget(self.bar_text)
        layout.addWidget(self.message)
        layout.addLayout(buttons)
        self.setMinimumWidth(560)
        self.resize(620, 460)

        self.hub_problem = hub_import_problem()
        self.refresh_cache()
        if self.hub_problem:
            self._say(self.hub_problem)
        elif offline_set():
            self._say("HF_HUB_OFFLINE is set: only the models already in the cache can be opened.")
        self._update_buttons()

    # ------------------------------------------------------------------ cache
    def refresh_cache(self) -> None:
        """List the hub cache's models again (disk only)."""
        where = self._cache or cache_dir()
        try:
            found = [describe_folder(f, rid, "cache") for rid, f in cached_models(self._cache)]
        except (CheckpointError, OSError) as exc:  # an unreadable cache: said, not a failure of the dialog
            found = []
            self._say(f"cannot read the hub cache {where}: {exc}")
        self._found = {f.name: f for f in found}
        keep = self.repo_edit.text().strip()
        self.cache_list.blockSignals(True)
        self.cache_list.clear()
        for f in found:
            item = QListWidgetItem(cache_entry_text(f), self.cache_list)
            item.setData(Qt.ItemDataRole.UserRole, f.name)
            item.setToolTip(str(f.folder))
        self.cache_list.blockSignals(False)
        n = len(found)
        self.cache_label.setText(f"Models &already in the local cache ({where}): {n}" if n else
                                 f"Models &already in the local cache ({where}): none yet")
        if keep in self._found:
            self.select_cached(keep)
        self._update_buttons()

    def cached_names(self) -> list[str]:
        return list(self._found)

    def select_cached(self, name: str) -> None:
        for i in range(self.cache_list.count()):
            if self.cache_list.item(i).data(Qt.ItemDataRole.UserRole) == name:
                self.cache_list.setCurrentRow(i)
                return

    def _on_pick(self, item, _previous=None) -> None:
        if item is not None and self._downloading is None:
            self.repo_edit.setText(item.data(Qt.ItemDataRole.UserRole))

    # ------------------------------------------------------------------ actions
    @property
    def downloading(self) -> bool:
        return self._downloading is not None

    def message_text(self) -> str:
        return self.message.text()

    def _say(self, text: str) -> None:
        self.message.setText(text)

    def _repo_id(self) -> str:
        return self.repo_edit.text().strip()

    def _update_buttons(self, *_args) -> None:
        busy = self.downloading
        repo = self._repo_id()
        can_open = not busy and openable(self._found.get(repo))
        self.open_button.setEnabled(can_open)
        self.download_button.setEnabled(not busy and bool(repo) and self.hub_problem is None)
        self.repo_edit.setReadOnly(busy)
        self.revision_edit.setReadOnly(busy)
        self.cache_list.setEnabled(not busy)
        (self.open_button if can_open else self.download_button).setDefault(True)

    def open_cached(self) -> bool:
        """Show the cache's copy of the repo id in the Pretrained workspace; no network."""
        repo = self._repo_id()
        found = self._found.get(repo)
        if found is None or self.downloading:
            self._say(f"{repo or 'that model'} is not in the local cache: Download fetches it" if not self.downloading
                      else "a download is running: Cancel it first")
            return False
        return self._open(found)

    def _open(self, found: FoundCheckpoint) -> bool:
        if not openable(found):
            self._say(f"{found.name} cannot be opened: {found.note or f'attnviz does not run {found.family} models'}")
            return False
        self._on_open(found.folder, found.name)
        self.accept()
        return True

    def download(self) -> bool:
        """Start fetching the repo id at the revision (the only place a download starts)."""
        if self.downloading:
            return False
        if self.hub_problem:
            self._say(self.hub_problem)
            return False
        repo = self._repo_id()
        if repo.count("/") != 1 or repo.startswith("/") or repo.endswith("/"):
            self._say(f"{repo!r} is not a Hugging Face repo id: {BAD_ID}" if repo else BAD_ID)
            return False
        revision = self.revision_edit.text().strip() or None
        self.progress.reset()
        self._downloading = repo
        self._say(f"downloading {repo}" + (f" at revision {revision}" if revision else "") + " …")
        self.bar.setRange(0, 0)  # busy until the first size is known
        self.bar_text.setText(progress_text(Snapshot()))
        self.bar.show()
        self.bar_text.show()
        self._update_buttons()
        self._timer.start()
        self.job.submit(fetch_job, repo, revision, self.progress)
        return True

    def cancel_download(self) -> bool:
        """Stop the running download at its next chunk; nothing is opened. False when none runs."""
        if not self.downloading or self.progress.stopped:
            return False
        self.progress.stop()
        self._say(f"cancelling the download of {self._downloading} … (a file the Hub streams through Xet may "
                  "finish first; Cancel again closes this dialog)")
        return True

    def reject(self) -> None:
        """Cancel (and Esc): stop a running download, else close (also while a cancelled one is ending)."""
        if not self.cancel_download():
            super().reject()

    def closeEvent(self, ev):  # noqa: N802 - Qt's name
        self.progress.stop()
        super().closeEvent(ev)

    # ------------------------------------------------------------------ job
    def _show_progress(self) -> None:
        s = self.progress.snapshot()
        permille = bar_permille(s, self.bar.value() if self.bar.maximum() == 1000 else 0)
        if permille is not None:
            self.bar.setRange(0, 1000)
            self.bar.setValue(permille)
        self.bar_text.setText(progress_text(s))

    def _finish(self) -> str:
        repo, self._downloading = self._downloading or "", None
        self._timer.stop()
        self._show_progress()
        self.bar.hide()
        self.refresh_cache()
        self._update_buttons()
        return repo

    def _on_done(self, _jid: int, result) -> None:
        cancelled = result is _CANCELLED or self.progress.stopped
        repo = self._finish()
        if cancelled:
            self.bar_text.hide()
            kept = "it had arrived whole: Open shows it" if openable(self._found.get(repo)) else (
                "what arrived stays in the cache, and Download resumes it")
            self._say(f"download cancelled: nothing was opened; {kept}")
            return
        self.bar_text.setText(f"{self.bar_text.text()} — done")
        self.select_cached(repo)
        self._open(result)

    def _on_failed(self, _jid: int, message: str) -> None:
        repo = self._finish()
        self.bar_text.hide()
        if self.progress.stopped:
            self._say("download cancelled: nothing was opened; what arrived stays in the cache, and Download "
                      "resumes it")
        else:
            self._say(message if repo in message else f"{repo}: {message}")


def open_in_pretrained(window, folder, name: str) -> bool:
    """Load the checkpoint folder in the window's Pretrained workspace and show it."""
    panel = window.panel("pretrained")
    if panel is None or not hasattr(panel, "load_model"):
        window.ctx.report(Level.ERROR, f"cannot open {name}: there is no Pretrained workspace")
        return False
    panel.auto_load = False
    window.show_workspace("pretrained")
    panel.load_model(str(folder), name)
    return True


def show_hub_dialog(window) -> HubDialog:
    """File ▸ Open from Hugging Face…: the window's one dialog (raised when already open), not modal so a
    download does not hold the window."""
    dlg = getattr(window, "hub_dialog", None)
    if dlg is not None:
        try:
            if dlg.isVisible():
                dlg.raise_()
                dlg.activateWindow()
                return dlg
        except RuntimeError:  # deleted with its parent
            pass
    dlg = HubDialog(lambda folder, name: open_in_pretrained(window, folder, name), window)
    dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    window.hub_dialog = dlg
    dlg.show()
    return dlg
