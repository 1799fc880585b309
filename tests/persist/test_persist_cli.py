"""attnviz-cli inspect / check on session files (and demo --save writing them)."""

from __future__ import annotations

import json

import pytest

from attnviz.cli import main
from attnviz.model.demos import build_demo
from attnviz.persist import load_session, save_session
from persist_helpers import read_zip, write_zip


@pytest.fixture
def river(tmp_path):
    return save_session(tmp_path / "river-bank.attnviz", build_demo("river-bank"))


def test_check_valid_file(river, capsys):
    assert main(["check", str(river)]) == 0
    out, err = capsys.readouterr()
    assert out == "ok: river-bank.attnviz, schema 1, 4 tokens, 1 head, 5 arrays\n"
    assert err == ""


def test_check_cross_attention_and_plural_heads(tmp_path, capsys):
    t = save_session(tmp_path / "t.attnviz", build_demo("translation"))
    v = save_session(tmp_path / "v.attnviz", build_demo("vla-mask"))
    assert main(["check", str(t)]) == 0
    assert main(["check", str(v)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ok: t.attnviz, schema 1, 3 query x 3 key tokens, 1 head, ")
    assert lines[1] == "ok: v.attnviz, schema 1, 44 tokens, 4 heads, 0 arrays"


def _file(d, content: bytes):
    (d / "f.attnviz").write_bytes(content)
    return d / "f.attnviz"


@pytest.mark.parametrize("make, match", [
    (lambda d: d / "missing.attnviz", "no such file"),
    (lambda d: d, "is a directory"),
    (lambda d: _file(d, b""), "empty"),
    (lambda d: _file(d, b"hello"), "not a zip"),
])
def test_check_bad_files(tmp_path, capsys, make, match):
    path = make(tmp_path)
    assert main(["check", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: ") and match in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_check_newer_schema(river, tmp_path, capsys):
    manifest, members = read_zip(river)
    manifest["schema_version"] = 7
    path = write_zip(tmp_path / "new.attnviz", manifest, members)
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "written by a newer attnviz (schema 7); this version reads up to 1" in err
    assert err.count("\n") == 1


def test_check_session_that_cannot_compute(tmp_path, capsys):
    """It loads, but RoPE needs an even head size: check says so and fails."""
    import dataclasses

    from attnviz.model.positional import PositionalConfig
    from attnviz.model.state import ModelConfig

    state = build_demo("vla-mask")
    state = dataclasses.replace(state, model=ModelConfig(d_model=63, nh=7), positional=PositionalConfig("rope"))
    path = save_session(tmp_path / "odd.attnviz", state)
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "cannot be computed" in err and err.count("\n") == 1


def test_check_refuses_a_block_of_millions_of_tokens_at_once(tmp_path, capsys):
    """A hostile file must not make check build ten million token vectors before saying no."""
    path = save_session(tmp_path / "vla.attnviz", build_demo("vla-mask"))
    manifest, members = read_zip(path)
    block = next(s for s in manifest["state"]["sources"] if s["kind"] == "custom")
    block["count"] = 10**7
    path = write_zip(tmp_path / "huge.attnviz", manifest, members)
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "a block holds at most 65,536" in err and err.count("\n") == 1


def test_inspect_json_matches_demo_json(river, capsys):
    assert main(["inspect", str(river), "--json"]) == 0
    from_file = capsys.readouterr().out
    assert main(["demo", "river-bank", "--json"]) == 0
    from_demo = capsys.readouterr().out
    assert from_file == from_demo
    report = json.loads(from_file)
    assert report["tokens"] == ["by", "the", "river", "bank"]
    assert [round(w, 2) for w in report["heads"][0]["weights"][3]] == [0.11, 0.07, 0.69, 0.14]


def test_inspect_json_long_session_is_a_summary(tmp_path, capsys):
    path = save_session(tmp_path / "long.attnviz", build_demo("long-context"))
    assert main(["inspect", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["summary"] is True and "512" in report["note"]


def test_inspect_human_readable(river, capsys):
    assert main(["inspect", str(river)]) == 0
    out = capsys.readouterr().out
    assert "attnviz session, schema 1" in out and "4 tokens, 1 head, d_model 4" in out


def test_inspect_bad_file(tmp_path, capsys):
    assert main(["inspect", str(tmp_path), "--json"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "is a directory" in captured.err


def test_demo_save_writes_a_session(tmp_path, capsys):
    path = tmp_path / "saved.attnviz"
    assert main(["demo", "savings-bank", "--save", str(path)]) == 0
    assert load_session(path) == build_demo("savings-bank")
    capsys.readouterr()
    assert main(["check", str(path)]) == 0
    assert capsys.readouterr().out.startswith("ok: saved.attnviz, schema 1, 4 tokens")


def test_cli_starts_without_loading_the_kernels_or_checkpoints():
    """``attnviz-cli --help`` and ``demo --list`` build every sub-command's parser: that must stay cheap."""
    import subprocess
    import sys

    code = ("import sys; from attnviz.cli import main; rc = main(['demo', '--list']); "
            "print(rc, sorted(m for m in ('numba', 'scipy', 'attnviz.engine', 'attnviz.checkpoints', 'PIL.Image')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "0 []"
