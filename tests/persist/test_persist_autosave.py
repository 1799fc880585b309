"""Autosave and crash recovery: a run that never reaches a clean exit leaves a recoverable autosave;
a clean exit, a clean save or a declined recovery removes it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import platformdirs
import pytest

from attnviz.model.demos import build_demo
from attnviz.persist import AutosaveStore, RecoveryInfo, SessionError, load_session
from attnviz.persist.autosave import AUTOSAVE_NAME, INFO_NAME, RUNNING_NAME

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def state():
    return build_demo("river-bank")


def test_default_directory_is_the_user_data_dir():
    assert AutosaveStore().directory == Path(platformdirs.user_data_dir("attnviz"))


def test_first_start_has_nothing_to_recover(tmp_path):
    store = AutosaveStore(tmp_path / "data")
    assert store.recoverable() is None
    assert store.mark_running() is False
    assert store.recoverable() is None
    assert (tmp_path / "data" / RUNNING_NAME).exists()


def test_simulated_crash_is_recoverable_on_next_start(tmp_path, state):
    run1 = AutosaveStore(tmp_path)
    run1.mark_running()
    run1.write(state, source_path="/home/me/bank.attnviz")
    del run1  # crash: no mark_clean_exit

    run2 = AutosaveStore(tmp_path)
    assert run2.mark_running() is True
    info = run2.recoverable()
    assert isinstance(info, RecoveryInfo)
    assert info.path == tmp_path / AUTOSAVE_NAME and info.size == info.path.stat().st_size > 0
    assert info.source_path == "/home/me/bank.attnviz"
    assert info.saved_at.endswith("Z")
    assert run2.load() == state


def test_recoverable_asked_before_mark_running(tmp_path, state):
    run1 = AutosaveStore(tmp_path)
    run1.mark_running()
    run1.write(state)
    run2 = AutosaveStore(tmp_path)
    info = run2.recoverable()
    assert info is not None and info.source_path is None  # untitled session
    run2.mark_running()
    assert run2.recoverable() == info  # still offered after this run's own marker exists


def test_real_crash_of_a_process(tmp_path, state):
    """A child process marks itself running, autosaves and is killed by an exception."""
    code = f"""
        from attnviz.model.demos import build_demo
        from attnviz.persist import AutosaveStore
        store = AutosaveStore({str(tmp_path)!r})
        store.mark_running()
        store.write(build_demo("river-bank"))
        raise SystemExit(70)  # dies without mark_clean_exit
        """
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 70, r.stderr
    store = AutosaveStore(tmp_path)
    store.mark_running()
    assert store.recoverable() is not None
    assert store.load() == state


def test_clean_exit_leaves_nothing(tmp_path, state):
    run1 = AutosaveStore(tmp_path)
    run1.mark_running()
    run1.write(state)
    run1.mark_clean_exit()
    assert sorted(os.listdir(tmp_path)) == []
    run2 = AutosaveStore(tmp_path)
    assert run2.mark_running() is False
    assert run2.recoverable() is None


def test_crash_without_autosave_offers_nothing(tmp_path):
    AutosaveStore(tmp_path).mark_running()
    run2 = AutosaveStore(tmp_path)
    assert run2.mark_running() is True
    assert run2.recoverable() is None


def test_declining_recovery_discards(tmp_path, state):
    run1 = AutosaveStore(tmp_path)
    run1.mark_running()
    run1.write(state)
    run2 = AutosaveStore(tmp_path)
    run2.mark_running()
    assert run2.recoverable() is not None
    run2.discard()
    assert run2.recoverable() is None
    assert not (tmp_path / AUTOSAVE_NAME).exists() and not (tmp_path / INFO_NAME).exists()
    with pytest.raises(SessionError, match="no autosaved session"):
        run2.load()


def test_clean_save_removes_the_autosave_copy(tmp_path, state):
    store = AutosaveStore(tmp_path / "data")
    store.mark_running()
    store.write(state)
    assert (tmp_path / "data" / AUTOSAVE_NAME).exists()
    real = store.save_clean(tmp_path / "bank.attnviz", state)
    assert load_session(real) == state
    assert not (tmp_path / "data" / AUTOSAVE_NAME).exists()
    # a crash after the clean save has nothing to offer: the work is in its real file
    assert AutosaveStore(tmp_path / "data").recoverable() is None


def test_failed_clean_save_keeps_the_autosave(tmp_path, state):
    store = AutosaveStore(tmp_path / "data")
    store.mark_running()
    store.write(state)
    with pytest.raises(SessionError):
        store.save_clean(tmp_path / "missing-dir" / "bank.attnviz", state)
    assert (tmp_path / "data" / AUTOSAVE_NAME).exists()


def test_autosave_overwrites_atomically_and_follows_edits(tmp_path, state):
    store = AutosaveStore(tmp_path)
    store.mark_running()
    store.write(state)
    edited = dataclasses.replace(state, view=dataclasses.replace(state.view, colormap="magma"))
    store.write(edited)
    assert AutosaveStore(tmp_path).load() == edited
    assert sorted(os.listdir(tmp_path)) == sorted([AUTOSAVE_NAME, INFO_NAME, RUNNING_NAME])  # no temp files


def test_write_if_changed(tmp_path, state):
    store = AutosaveStore(tmp_path)
    assert store.write_if_changed(state) is True
    before = (tmp_path / AUTOSAVE_NAME).stat().st_mtime_ns
    assert store.write_if_changed(state) is False
    assert (tmp_path / AUTOSAVE_NAME).stat().st_mtime_ns == before
    edited = dataclasses.replace(state, view=dataclasses.replace(state.view, log_scale=True))
    assert store.write_if_changed(edited) is True
    store.discard()
    assert store.write_if_changed(edited) is True  # nothing on disk any more: write again


def test_damaged_autosave_is_a_session_error(tmp_path, state):
    store = AutosaveStore(tmp_path)
    store.mark_running()
    store.write(state)
    (tmp_path / AUTOSAVE_NAME).write_bytes(b"garbage")
    run2 = AutosaveStore(tmp_path)
    run2.mark_running()
    assert run2.recoverable() is not None  # offered; loading tells what is wrong
    with pytest.raises(SessionError, match="not a zip"):
        run2.load()


def test_damaged_info_file_still_offers_recovery(tmp_path, state):
    store = AutosaveStore(tmp_path)
    store.mark_running()
    store.write(state)
    (tmp_path / INFO_NAME).write_text("{not json")
    info = AutosaveStore(tmp_path).recoverable()
    assert info is not None and info.saved_at == "" and info.source_path is None


def test_marker_records_the_process(tmp_path):
    AutosaveStore(tmp_path).mark_running()
    marker = json.loads((tmp_path / RUNNING_NAME).read_text())
    assert marker["pid"] == os.getpid() and marker["started"].endswith("Z")


def test_unwritable_directory(tmp_path, state):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    store = AutosaveStore(blocker / "sub")
    with pytest.raises(SessionError, match="cannot create the autosave folder"):
        store.mark_running()
    with pytest.raises(SessionError):
        store.write(state)
    assert store.recoverable() is None
