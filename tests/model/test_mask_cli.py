"""``attnviz-cli mask-export`` end to end on a saved session (the seed-000 VLA demo)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz.cli import main
from attnviz.model.demos import build_demo
from attnviz.model.mask.export import evaluate_mask_mod, import_mask
from attnviz.model.mask.rules import make_attn_mask
from attnviz.model.sequence import assemble
from attnviz.persist import save_session


@pytest.fixture(scope="module")
def vla_session(tmp_path_factory):
    state = build_demo("vla-mask")
    path = tmp_path_factory.mktemp("sessions") / "vla.attnviz"
    save_session(path, state)
    qseq, kseq = assemble(state)
    dense = state.mask.compile(list(qseq.segments), None, qseq.T, qseq.T)
    return path, dense, list(qseq.segments)


def test_exports_npy_json_flex(vla_session, tmp_path, capsys):
    path, dense, segs = vla_session
    T = dense.shape[0]
    assert main(["mask-export", str(path), "--format", "npy", "--out", str(tmp_path / "m.npy")]) == 0
    assert "wrote" in capsys.readouterr().out
    np.testing.assert_array_equal(np.load(tmp_path / "m.npy"), dense)
    assert main(["mask-export", str(path), "--format", "json", "--out", str(tmp_path / "m.json")]) == 0
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["context"]["Tq"] == T
    np.testing.assert_array_equal(import_mask(tmp_path / "m.json").compile(segs), dense)
    np.testing.assert_array_equal(import_mask(tmp_path / "m.npy").compile([], None, T, T), dense)
    assert main(["mask-export", str(path), "--format", "flex", "--out", str(tmp_path / "m.py")]) == 0
    np.testing.assert_array_equal(evaluate_mask_mod((tmp_path / "m.py").read_text(), T, T), dense)


def test_unrepresentable_formats_fail_on_one_line(vla_session, tmp_path, capsys):
    path = vla_session[0]
    assert main(["mask-export", str(path), "--format", "ar-mask", "--out", str(tmp_path / "a.json")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot export the mask as ar-mask:") and "\n" not in err
    assert "not a block-causal pattern" in err
    assert not (tmp_path / "a.json").exists()
    assert main(["mask-export", str(path), "--format", "seqlens", "--out", str(tmp_path / "s.json")]) == 1
    assert "not block-diagonal" in capsys.readouterr().err


def test_ar_mask_export_of_a_causal_session(tmp_path, capsys):
    from dataclasses import replace

    from attnviz.model.mask.presets import preset

    state = build_demo("river-bank")
    state = replace(state, mask=preset("prefix_lm", L=2))
    save_session(tmp_path / "s.attnviz", state)
    assert main(["mask-export", str(tmp_path / "s.attnviz"), "--format", "ar-mask", "--out",
                 str(tmp_path / "ar.json")]) == 0
    doc = json.loads((tmp_path / "ar.json").read_text())
    qseq, _ = assemble(state)
    np.testing.assert_array_equal(make_attn_mask(doc["ar_mask"], doc["valid"]),
                                  state.mask.compile(list(qseq.segments)))


def test_missing_and_corrupt_session(tmp_path, capsys):
    assert main(["mask-export", str(tmp_path / "none.attnviz"), "--format", "npy", "--out",
                 str(tmp_path / "m.npy")]) == 1
    assert capsys.readouterr().err.startswith("error: ")
    (tmp_path / "bad.attnviz").write_bytes(b"PK\x03\x04garbage")
    assert main(["mask-export", str(tmp_path / "bad.attnviz"), "--format", "npy", "--out",
                 str(tmp_path / "m.npy")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
