"""File ▸ Open from Hugging Face…: the cache as huggingface_hub lays it out is listed and opened without any
network; Download runs the real huggingface_hub against a stand-in Hub on 127.0.0.1 (tests/ui/fake_hub.py),
its progress reaches the dialog's bar, Cancel stops the transfer and opens nothing; offline, no network, a bad,
unknown, gated or non-checkpoint repo are one line in the dialog; without huggingface_hub the cache is still
listed and Download says what to install; the dialog's buttons and fields have access keys."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("huggingface_hub")

from fake_hub import FakeHub, use_fake_hub  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402

from attnviz.checkpoints.errors import CheckpointError  # noqa: E402
from attnviz.ui import hub_dialog  # noqa: E402
from attnviz.ui.access_keys import missing_access_keys  # noqa: E402
from attnviz.ui.hub_dialog import BAD_ID, NEEDS_HUB, HubDialog, bar_permille, fetch_job  # noqa: E402
from attnviz.ui.hub_progress import DownloadProgress, Snapshot  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
WAIT_MS = 20000


def checkpoint_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.name.startswith("golden")}


def hub_repo(cache: Path, repo_id: str, rev: str, files: dict[str, bytes]) -> Path:
    """One revision as the hub writes it: blobs named by their hash, snapshot links, refs/main."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snap = repo / "snapshots" / rev
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snap / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    return snap


@pytest.fixture
def cache(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return cache


class Opened(list):
    def __call__(self, folder, name):
        self.append((Path(folder), name))


@pytest.fixture
def dialog(qtbot, cache):
    def make():
        opened = Opened()
        dlg = HubDialog(opened, cache=cache)
        dlg.opened = opened
        qtbot.addWidget(dlg)
        dlg.show()
        qtbot.waitExposed(dlg)
        return dlg

    return make


def no_download(monkeypatch):
    import huggingface_hub

    calls = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **kw: calls.append(a) or 1 / 0)
    return calls


def test_the_cache_is_listed_and_opened_without_any_download(qtbot, cache, dialog, monkeypatch):
    calls = no_download(monkeypatch)
    gpt2 = hub_repo(cache, "acme/tiny-gpt2", "a" * 40, checkpoint_files(DATA / "tiny_gpt2"))
    hub_repo(cache, "acme/tiny-qwen3", "b" * 40, checkpoint_files(DATA / "tiny_qwen3"))
    hub_repo(cache, "acme/odd", "c" * 40, {"config.json": b'{"model_type": "nothing-we-run"}'})
    hub = FakeHub({"acme/tiny-gpt2": checkpoint_files(DATA / "tiny_gpt2")}).__enter__()
    use_fake_hub(monkeypatch, hub)  # any request the dialog made would reach it
    dlg = dialog()
    assert dlg.cached_names() == ["acme/odd", "acme/tiny-gpt2", "acme/tiny-qwen3"]
    texts = [dlg.cache_list.item(i).text() for i in range(dlg.cache_list.count())]
    assert texts[1].startswith("acme/tiny-gpt2  —  GPT-2, 11,904 weights, f32")
    assert str(cache) in dlg.cache_label.text() and dlg.cache_label.text().endswith(": 3")
    assert not dlg.open_button.isEnabled()  # nothing chosen yet

    assert texts[0] == "acme/odd  —  nothing-we-run  (no model.safetensors)"
    dlg.select_cached("acme/odd")
    assert dlg.repo_edit.text() == "acme/odd" and not dlg.open_button.isEnabled()
    assert not dlg.open_cached() and dlg.opened == []
    assert dlg.message_text().startswith("acme/odd cannot be opened:") and dlg.isVisible()

    dlg.select_cached("acme/tiny-gpt2")
    assert dlg.open_button.isEnabled() and dlg.open_button.isDefault()
    qtbot.mouseClick(dlg.open_button, Qt.MouseButton.LeftButton)
    assert dlg.opened == [(gpt2, "acme/tiny-gpt2")] and not dlg.isVisible()
    hub.__exit__()
    assert calls == [] and hub.requests == []  # opening the dialog, choosing and opening: no network at all


def test_a_repo_not_in_the_cache_cannot_be_opened_only_downloaded(dialog):
    dlg = dialog()
    assert dlg.cache_label.text().endswith(": none yet")
    dlg.repo_edit.setText("acme/elsewhere")
    assert not dlg.open_button.isEnabled() and dlg.download_button.isEnabled()
    assert not dlg.open_cached() and "not in the local cache: Download fetches it" in dlg.message_text()


def tiny_gpt2_padded(name: str, extra: int) -> dict[str, bytes]:
    """tiny_gpt2's files with ``extra`` bytes more in one of them (a padded tokenizer.json stays valid JSON; a
    padded model.safetensors is not a readable file, for downloads that are cancelled), and a pickle."""
    files = checkpoint_files(DATA / "tiny_gpt2")
    files[name] += (b" " if name.endswith(".json") else b"\0") * extra
    files["pytorch_model.bin"] = b"pickle"  # never fetched
    return files


def test_the_bar_never_moves_back_when_a_new_file_announces_its_size():
    # tokenizer.json (800 kB) is half written, then model.safetensors announces its 50 kB: 400/850 < 400/800
    first = bar_permille(Snapshot(bytes_done=400_000, bytes_total=800_000, files_total=3), 0)
    later = bar_permille(Snapshot(bytes_done=400_000, bytes_total=850_000, files_total=3), first)
    assert first == 500 and later == 500
    assert bar_permille(Snapshot(bytes_done=850_000, bytes_total=850_000, files_total=3), later) == 1000
    assert bar_permille(Snapshot(files_done=1, files_total=4), 0) == 250  # sizes not known yet: by files
    assert bar_permille(Snapshot(), 0) is None  # nothing known: the bar stays busy


def test_download_shows_progress_then_opens_the_model(qtbot, cache, dialog, monkeypatch):
    files = tiny_gpt2_padded("tokenizer.json", 800_000)
    total = sum(len(d) for n, d in files.items() if n != "pytorch_model.bin")
    with FakeHub({"acme/tiny-gpt2": files}, piece=8192, pause=0.01) as hub:
        use_fake_hub(monkeypatch, hub, chunk=8192)
        dlg = dialog()
        values, texts = [], []
        dlg.bar.valueChanged.connect(values.append)
        dlg.bar_text.setText("")
        dlg.repo_edit.setText("acme/tiny-gpt2")
        qtbot.mouseClick(dlg.download_button, Qt.MouseButton.LeftButton)
        assert dlg.downloading and not dlg.download_button.isEnabled() and dlg.bar.isVisible()
        assert missing_access_keys(dlg) == []
        qtbot.waitUntil(lambda: texts.append(dlg.bar_text.text()) or not dlg.downloading, timeout=WAIT_MS)
    assert dlg.message_text() == "downloading acme/tiny-gpt2 …"
    snap = cache / "models--acme--tiny-gpt2" / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    assert dlg.opened == [(snap, "acme/tiny-gpt2")] and not dlg.isVisible()
    assert sorted(os.listdir(snap)) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert (snap / "tokenizer.json").read_bytes() == files["tokenizer.json"]
    partial = [v for v in values if 0 < v < 1000]
    assert len(partial) >= 3 and partial == sorted(partial) and values[-1] == 1000  # the bar moved, then filled
    assert any(" of " in t and "files" in t and not t.startswith(f"{total / 1e6:.1f}") for t in texts)
    assert dlg.bar_text.text() == f"{total / 1e3:.1f} kB of {total / 1e3:.1f} kB · 3 of 3 files — done"
    assert "pytorch_model.bin" not in hub.sent


def test_cancel_stops_the_transfer_and_opens_nothing(qtbot, cache, dialog, monkeypatch):
    files = tiny_gpt2_padded("model.safetensors", 3_000_000)
    with FakeHub({"acme/tiny-gpt2": files}, piece=8192, pause=0.01) as hub:  # ~4 s for the weights
        use_fake_hub(monkeypatch, hub, chunk=8192)
        dlg = dialog()
        dlg.repo_edit.setText("acme/tiny-gpt2")
        dlg.download()
        qtbot.waitUntil(lambda: hub.sent.get("model.safetensors", 0) > 100_000, timeout=WAIT_MS)
        t0 = time.perf_counter()
        qtbot.mouseClick(dlg.cancel_button, Qt.MouseButton.LeftButton)
        assert dlg.isVisible() and "cancelling" in dlg.message_text()
        qtbot.waitUntil(lambda: not dlg.downloading, timeout=WAIT_MS)
        stopped_after = time.perf_counter() - t0
        sent = hub.sent["model.safetensors"]
        qtbot.wait(400)
        assert hub.sent["model.safetensors"] - sent <= 3 * 8192  # the transfer stopped, not only the bar
    assert stopped_after < 2.0
    assert "model.safetensors" not in hub.finished and sent < len(files["model.safetensors"]) / 2
    assert dlg.opened == [] and dlg.isVisible()
    assert dlg.message_text().startswith("download cancelled: nothing was opened; what arrived stays in the cache")
    assert not dlg.bar.isVisible() and dlg.download_button.isEnabled()
    snaps = cache / "models--acme--tiny-gpt2" / "snapshots"
    assert not list(snaps.rglob("model.safetensors"))  # no partial model in the snapshot
    if "acme/tiny-gpt2" in dlg.cached_names():  # the small files had arrived: listed, but not openable
        dlg.select_cached("acme/tiny-gpt2")
        assert not dlg.open_button.isEnabled() and dlg.download_button.isDefault()
        assert not dlg.open_cached() and dlg.opened == []
        assert dlg.message_text() == "acme/tiny-gpt2 cannot be opened: no model.safetensors"
    dlg.reject()
    assert not dlg.isVisible()  # Cancel with no download closes


def test_cancel_twice_closes_while_the_download_is_ending(qtbot, cache, dialog, monkeypatch):
    files = tiny_gpt2_padded("model.safetensors", 3_000_000)
    with FakeHub({"acme/tiny-gpt2": files}, piece=8192, pause=0.01) as hub:
        use_fake_hub(monkeypatch, hub, chunk=8192)
        dlg = dialog()
        dlg.repo_edit.setText("acme/tiny-gpt2")
        dlg.download()
        qtbot.waitUntil(lambda: hub.sent.get("model.safetensors", 0) > 50_000, timeout=WAIT_MS)
        dlg.reject()
        assert dlg.isVisible() and dlg.progress.stopped and "Cancel again closes" in dlg.message_text()
        dlg.reject()
        assert not dlg.isVisible()
        qtbot.waitUntil(lambda: not dlg.downloading, timeout=WAIT_MS)
    assert dlg.opened == [] and "model.safetensors" not in hub.finished


def test_offline_is_one_line(qtbot, cache, dialog, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    dlg = dialog()
    assert dlg.message_text() == "HF_HUB_OFFLINE is set: only the models already in the cache can be opened."
    dlg.repo_edit.setText("acme/tiny-llama")
    dlg.revision_edit.setText("v1")
    dlg.download()
    qtbot.waitUntil(lambda: not dlg.downloading, timeout=WAIT_MS)
    assert dlg.message_text() == (f"offline: HF_HUB_OFFLINE is set, and acme/tiny-llama at revision v1 is not in "
                                  f"the local cache ({cache})")
    assert dlg.opened == [] and not dlg.bar.isVisible()


def test_no_network_is_one_line(qtbot, cache, dialog, monkeypatch):
    with FakeHub({}) as hub:
        use_fake_hub(monkeypatch, hub)
    dlg = dialog()  # the stand-in has shut down: nothing listens on its port
    dlg.repo_edit.setText("acme/tiny-gpt2")
    dlg.download()
    qtbot.waitUntil(lambda: not dlg.downloading, timeout=WAIT_MS)
    assert dlg.message_text() == ("offline: the Hugging Face Hub cannot be reached (no network?), and acme/tiny-gpt2 "
                                  f"is not in the local cache ({cache})")
    assert dlg.opened == []


@pytest.mark.parametrize("text, message", [
    ("no-org", f"'no-org' is not a Hugging Face repo id: {BAD_ID}"),
    ("a/b/c", f"'a/b/c' is not a Hugging Face repo id: {BAD_ID}"),
    ("", BAD_ID),
])
def test_a_bad_repo_id_is_said_before_anything_runs(dialog, monkeypatch, text, message):
    calls = no_download(monkeypatch)
    dlg = dialog()
    dlg.repo_edit.setText(text)
    assert not dlg.download() and not dlg.downloading
    assert dlg.message_text() == message and calls == []


@pytest.mark.parametrize("repo, message", [
    ("bad..name/x", "'bad..name/x' is not a Hugging Face repo id (ORG/NAME)"),
    ("acme/nothing", "acme/nothing was not found on the Hub (a private repo needs HF_TOKEN)"),
    ("acme/gated", "acme/gated is gated: accept its terms on the Hub, then set HF_TOKEN (or log in with "
                   "`hf auth login`)"),
    ("acme/data", "acme/data has no config.json at its top: it is not a checkpoint attnviz reads"),
])
def test_a_repo_that_cannot_be_fetched_is_one_line(qtbot, cache, dialog, monkeypatch, repo, message):
    repos = {"acme/gated": {"config.json": b"{}"}, "acme/data": {"README.md": b"data", "train.csv": b"a,b"}}
    with FakeHub(repos, gated={"acme/gated"}) as hub:
        use_fake_hub(monkeypatch, hub)
        dlg = dialog()
        dlg.repo_edit.setText(repo)
        dlg.download()
        qtbot.waitUntil(lambda: not dlg.downloading, timeout=WAIT_MS)
    assert dlg.message_text().startswith(message) and "\n" not in dlg.message_text()
    assert dlg.opened == [] and dlg.isVisible()


def test_without_huggingface_hub_the_cache_opens_and_download_says_what_to_install(qtbot, cache, dialog,
                                                                                   monkeypatch):
    """The desktop bundle leaves huggingface_hub out: importing it fails as a missing module does."""
    snap = hub_repo(cache, "acme/tiny-gpt2", "a" * 40, checkpoint_files(DATA / "tiny_gpt2"))
    for name in [m for m in sys.modules if m == "huggingface_hub" or m.startswith("huggingface_hub.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # `import huggingface_hub` raises ImportError
    with pytest.raises(ImportError):
        import huggingface_hub  # noqa: F401
    dlg = dialog()
    assert dlg.message_text() == NEEDS_HUB and "pip install huggingface_hub" in NEEDS_HUB
    assert dlg.cached_names() == ["acme/tiny-gpt2"]
    dlg.repo_edit.setText("acme/other")
    assert not dlg.download_button.isEnabled() and not dlg.download()
    with pytest.raises(CheckpointError, match="pip install huggingface_hub"):
        fetch_job("acme/other", None, DownloadProgress())
    dlg.select_cached("acme/tiny-gpt2")
    assert dlg.open_cached() and dlg.opened == [(snap, "acme/tiny-gpt2")]


def test_every_button_and_field_has_its_own_access_key(dialog):
    dlg = dialog()
    assert missing_access_keys(dlg) == []
    assert [b.text() for b in (dlg.open_button, dlg.download_button, dlg.cancel_button)] == [
        "&Open", "&Download", "&Cancel"]


def test_file_menu_opens_the_dialog_and_the_model_opens_in_the_pretrained_workspace(qtbot, tmp_path, cache,
                                                                                      monkeypatch):
    from attnviz.model.demos import build_demo
    from attnviz.model.session import Session
    from attnviz.ui.context import AppContext
    from attnviz.ui.main_window import MainWindow
    from attnviz.ui.settings import AppSettings

    calls = no_download(monkeypatch)
    snap = hub_repo(cache, "acme/tiny-gpt2", "a" * 40, checkpoint_files(DATA / "tiny_gpt2"))
    ctx = AppContext(Session(build_demo("river-bank")))
    window = MainWindow(ctx, settings=AppSettings(tmp_path / "settings.ini"), autosave=None)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    try:
        assert window.hub_action.text() == "Open from &Hugging Face…"
        assert window.hub_action.shortcut().toString() == "Ctrl+Shift+H"
        assert ("File", "Open from Hugging Face…", "Ctrl+Shift+H") in window.shortcut_rows()
        window.hub_action.trigger()
        dlg = window.hub_dialog
        assert isinstance(dlg, HubDialog) and dlg.isVisible() and not dlg.isModal()
        window.hub_action.trigger()
        assert window.hub_dialog is dlg  # one dialog, raised again
        dlg.select_cached("acme/tiny-gpt2")
        panel = window.panel("pretrained")
        assert hasattr(panel, "load_model"), getattr(panel, "text", lambda: panel)()  # not the placeholder
        with qtbot.waitSignal(panel.model_loaded, timeout=60000):
            assert dlg.open_cached()
        assert window.workspace == "pretrained"
        assert panel.ckpt.folder == snap and panel.ckpt.name == "acme/tiny-gpt2"
        assert calls == []
        window.hub_action.trigger()  # the opened dialog closed (and was deleted): the menu makes a new one
        assert window.hub_dialog is not dlg and window.hub_dialog.isVisible()
        assert window.hub_dialog.cached_names() == ["acme/tiny-gpt2"]
        window.hub_dialog.reject()
    finally:
        window.stop_workers()
        ctx.compute.shutdown(timeout=5)


def test_progress_bars_count_what_the_library_reports_and_cancel_raises_from_update():
    p = DownloadProgress()
    bar = p.bar_class()
    files = bar(desc="Fetching 3 files", total=3)
    transfer = bar(desc="Downloading bytes", total=0, initial=0, unit="B", unit_scale=True)
    written = bar(desc="Reconstructing", total=0, initial=0, unit="B", unit_scale=True)
    written.total += 5000
    written.update(1200)
    transfer.update(900)
    files.update(1)
    s = p.snapshot()
    assert (s.bytes_done, s.bytes_total, s.files_done, s.files_total, s.started) == (1200, 5000, 1, 3, True)
    assert hub_dialog.progress_text(s) == "1.2 kB of 5.0 kB · 1 of 3 files"
    p.stop()
    from attnviz.cancel import Cancelled

    with pytest.raises(Cancelled):
        written.update(10)
    with pytest.raises(Cancelled):
        bar(total=1)
    assert p.snapshot().bytes_done == 1200
    p.reset()
    assert not p.stopped and not p.snapshot().started
