"""Atomic save: whatever fails during a save (the writer, fsync, the rename, a full disk, a kill),
the previous file stays byte-identical and no temporary file is left behind (a kill leaves one,
beside the target, which never disturbs it)."""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

import attnviz.persist.atomic as atomic
import attnviz.persist.container as container
from attnviz.persist import SessionError, load_payload, save_payload
from persist_helpers import write_sample

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture
def old(tmp_path):
    """A valid session at the target path, and its exact bytes."""
    path = write_sample(tmp_path / "work.attnviz")
    return path, path.read_bytes()


def _new_payload():
    return {"version": "new"}, {"w": np.arange(200_000, dtype=np.float64)}, {"b": b"x" * 5000}


def _assert_untouched(path: Path, data: bytes):
    assert path.read_bytes() == data
    assert load_payload(path).tree["title"] == "river bank"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temp file left


def test_successful_save_replaces_the_file(old):
    path, _ = old
    save_payload(path, *_new_payload())
    assert load_payload(path).tree == {"version": "new"}
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_writer_failing_after_some_bytes(old, monkeypatch):
    path, data = old
    real = container._write_member
    calls = []

    def failing(zf, name, payload, date_time, limits):
        calls.append(name)
        if len(calls) == 2:  # the first member went through; this one dies half-way
            with zf.open(zipfile.ZipInfo(name, date_time=date_time), "w") as m:
                m.write(payload[: len(payload) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        real(zf, name, payload, date_time, limits)

    monkeypatch.setattr(container, "_write_member", failing)
    with pytest.raises(SessionError, match="No space left on device; the previous file is unchanged"):
        save_payload(path, *_new_payload())
    assert len(calls) == 2
    _assert_untouched(path, data)


def test_writer_raising_a_non_os_error(old, monkeypatch):
    path, data = old

    def boom(*args):
        raise KeyboardInterrupt  # e.g. Ctrl-C during the save

    monkeypatch.setattr(container, "_write_member", boom)
    with pytest.raises(KeyboardInterrupt):
        save_payload(path, *_new_payload())
    _assert_untouched(path, data)


def test_fsync_failure(old, monkeypatch):
    path, data = old

    def bad_fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(atomic.os, "fsync", bad_fsync)
    with pytest.raises(SessionError, match="Input/output error"):
        save_payload(path, *_new_payload())
    monkeypatch.undo()
    _assert_untouched(path, data)


def test_rename_failure(old, monkeypatch):
    path, data = old

    def bad_replace(src, dst):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(atomic.os, "replace", bad_replace)
    with pytest.raises(SessionError, match="could not save .*Permission denied"):
        save_payload(path, *_new_payload())
    monkeypatch.undo()
    _assert_untouched(path, data)


def test_content_error_mid_save(old):
    """A NaN found in the second array, after the first was written: the old file stays."""
    path, data = old
    with pytest.raises(SessionError, match="NaN"):
        save_payload(path, {}, {"a": np.zeros(10), "b": np.array([np.nan])})
    _assert_untouched(path, data)


def test_missing_directory(tmp_path):
    with pytest.raises(SessionError, match="could not save .*No such file or directory") as info:
        save_payload(tmp_path / "no" / "such" / "dir.attnviz", {})
    assert "previous file" not in str(info.value)  # there was none


def _run_child(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_full_disk(old):
    """A real full disk, as the kernel reports it: the child may not grow any file beyond 64 kB
    (RLIMIT_FSIZE), so its writes of the ~1.6 MB session fail with EFBIG inside the zip writer."""
    path, data = old
    r = _run_child(f"""
        import resource, signal, sys
        import numpy as np
        from attnviz.persist import SessionError, save_payload
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))
        try:
            save_payload({str(path)!r}, {{"v": 2}}, {{"w": np.arange(200_000.0)}})
        except SessionError as exc:
            print("SessionError:", exc)
            sys.exit(3)
        """)
    assert r.returncode == 3, r.stderr
    assert "File too large; the previous file is unchanged" in r.stdout
    _assert_untouched(path, data)


def test_killed_mid_write(old):
    """SIGKILL while the temp file is half written: the target is intact; the stale temp file is
    the only trace, and the next save still works."""
    path, data = old
    code = f"""
        import sys, time, zipfile
        import numpy as np
        import attnviz.persist.container as container
        from attnviz.persist import save_payload

        def stall(zf, name, payload, date_time, limits):
            with zf.open(zipfile.ZipInfo(name, date_time=date_time), "w") as m:
                m.write(payload[: len(payload) // 2])
                m._fileobj.flush()
                print("half-written", flush=True)
                time.sleep(60)

        container._write_member = stall
        save_payload({str(path)!r}, {{"v": 2}}, {{"w": np.arange(200_000.0)}})
        """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]))
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = child.stdout.readline()
        assert line.strip() == "half-written", child.stderr.read()
        temps = [p for p in path.parent.iterdir() if p != path]
        assert len(temps) == 1 and temps[0].name.startswith(".work.attnviz.") and temps[0].stat().st_size > 0
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    assert path.read_bytes() == data
    assert load_payload(path).tree["title"] == "river bank"
    save_payload(path, {"after": "kill"})
    assert load_payload(path).tree == {"after": "kill"}


def test_existing_mode_is_kept(old):
    path, _ = old
    path.chmod(0o600)
    save_payload(path, {})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_new_file_follows_umask(tmp_path):
    previous = os.umask(0o027)
    try:
        path = save_payload(tmp_path / "n.attnviz", {})
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_symlink_target_is_replaced_and_link_kept(old, tmp_path):
    path, _ = old
    link = tmp_path / "link.attnviz"
    link.symlink_to(path)
    save_payload(link, {"via": "link"})
    assert link.is_symlink()
    assert load_payload(path).tree == {"via": "link"}


def test_atomic_write_directly(tmp_path):
    target = tmp_path / "t.txt"
    target.write_bytes(b"old")
    with pytest.raises(ValueError):
        atomic.atomic_write(target, lambda f: (f.write(b"partial"), (_ for _ in ()).throw(ValueError("x"))))
    assert target.read_bytes() == b"old"
    assert atomic.atomic_write(target, lambda f: f.write(b"new")) == target.resolve()
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]
