"""Interventions on Swin against PyTorch forward pre-hooks on transformers 5.24's eager SwinModel and
SwinForImageClassification (tools/make_swin_intervention_goldens.py): zero and mean ablation, scaling, patching a
head from a second picture, knocking out edges in every layer and in some heads of one layer, each within 1e-5
(relative to the largest value) on the pooled output and the class logits; the exported hook script is byte for
byte the one the golden maker ran and prints attnviz's outputs; bad requests are one line each."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.intervention_swin import (check_swin_head, parse_swin_heads, swin_classifier, swin_layout,
                                                   swin_patch_head, swin_run, window_knockout)
from attnviz.checkpoints.intervention_swin_code import swin_script
from attnviz.checkpoints.interventions import Edit, cosine
from attnviz.checkpoints.swin import window_mask

MODELS = ["tiny_swin", "tiny_swin_cls"]
TOL = 1e-5
SCRIPT = {"ablate": {(1, 1): "zero", (3, 0): "mean", (5, 3): "zero"}, "scale": {(4, 2): 2.0}}  # the golden maker's
PIXELS, CLEAN = "intervention_pixels.npy", "intervention_clean_pixels.npy"


def knockout_mask(gh: int, gw: int) -> np.ndarray:
    """The golden maker's: every query loses the key right of it, every even query the key below it."""
    T = gh * gw
    ko = np.zeros((T, T), dtype=bool)
    i = np.arange(T - 1)
    ko[i, i + 1] = True
    i = np.arange(0, T - gw, 2)
    ko[i, i + gw] = True
    return ko


@pytest.fixture(scope="module")
def models():
    out = {}
    for n in MODELS:
        ck = load_checkpoint(DATA / n)
        out[n] = (ck, swin_classifier(ck.folder), golden(DATA / n / "golden_interventions.npz"))
    return out


def edits(g, lay):
    """name -> the Edit the golden maker's hooks made (the patch recorded from attnviz's clean pass)."""
    c_rec: dict = {}
    yield "plain", Edit()
    yield "zero", Edit(ablate={tuple(map(int, h)): "zero" for h in g["ablate"]})
    yield "mean", Edit(ablate={tuple(map(int, h)): "mean" for h in g["ablate"]})
    yield "scaled", Edit(scale={tuple(map(int, h)): float(f) for h, f in zip(g["scale_heads"], g["scale_factors"])})
    yield "knockout", Edit(knockout={layer: knockout_mask(*lay.grids[layer]) for layer in range(lay.n_layer)})
    L, heads = int(g["head_ko_layer"]), [int(h) for h in g["head_ko_heads"]]
    per_head = np.zeros((lay.heads[L], lay.tokens(L), lay.tokens(L)), dtype=bool)
    per_head[heads] = knockout_mask(*lay.grids[L])
    yield "knockout_heads", Edit(knockout={L: per_head})
    yield "record", Edit(record=c_rec)
    yield "patched", Edit(patch_heads={(int(a), int(b)): c_rec[int(a)][int(b)] for a, b in g["patch"]})


@pytest.mark.parametrize("name", MODELS)
def test_every_intervention_matches_forward_hooks(models, name):
    ck, cls, g = models[name]
    c, w = ck.config, ck.weights
    assert (cls is None) == (name == "tiny_swin")
    lay = swin_layout(c, (12, 24))
    assert lay.grids == tuple(map(tuple, g["grids"])) and lay.heads == tuple(g["heads"])
    tol = TOL * max(1.0, float(np.abs(g["plain_pooled"]).max()))
    plain = None
    for key, edit in edits(g, lay):
        if key == "record":
            swin_run(c, w, g["clean_pixels"], edit)
            continue
        res = swin_run(c, w, g["pixels"], edit, cls)
        np.testing.assert_allclose(res.pooled, g[f"{key}_pooled"], atol=tol, rtol=0, err_msg=key)
        if cls is not None:
            np.testing.assert_allclose(res.logits, g[f"{key}_logits"], atol=TOL, rtol=0, err_msg=key)
        else:
            assert res.logits is None
        if key == "plain":
            plain = res
        else:
            assert np.abs(g[f"{key}_pooled"] - g["plain_pooled"]).max() > 1e-4  # the golden's hooks did change it
            assert cosine(res.pooled, plain.pooled) < 1 - 1e-7
    assert [a.shape for a in plain.attentions] == [(2, 288, 288)] * 2 + [(2, 72, 72)] * 2 + [(4, 18, 18)] * 2
    assert [s.shape for s in plain.stream] == [(288, 8)] * 2 + [(72, 16)] * 2 + [(18, 32)] * 2
    assert plain.stage_attentions(2).shape == (2, 4, 18, 18)


def test_knockout_renormalises_inside_the_windows(models):
    ck, _cls, g = models["tiny_swin"]
    c, w = ck.config, ck.weights
    lay = swin_layout(c, (12, 24))
    ko = knockout_mask(*lay.grids[1])
    res = swin_run(c, w, g["pixels"], Edit(knockout={1: ko}))
    a = res.attentions[1]  # (nh, T, T), layer 1 is shifted
    assert np.all(a[:, ko] == 0)
    np.testing.assert_allclose(a.sum(-1), 1.0, atol=1e-5)
    inside = window_knockout(lay, 1, ko)
    assert inside.sum() < ko.sum() and not (inside & ~window_mask(lay.windows[1])).any()
    same = swin_run(c, w, g["pixels"], Edit(knockout={1: inside}))  # the edges outside the windows never existed
    np.testing.assert_array_equal(same.hidden, res.hidden)


def test_patch_head_from_a_second_picture(models):
    ck, cls, g = models["tiny_swin_cls"]
    heads = [tuple(map(int, h)) for h in g["patch"]]
    clean, corrupted, patched = swin_patch_head(ck.config, ck.weights, g["clean_pixels"], g["pixels"], heads, cls)
    tol = TOL * max(1.0, float(np.abs(g["plain_pooled"]).max()))
    np.testing.assert_allclose(clean.pooled, g["clean_pooled"], atol=tol, rtol=0)
    np.testing.assert_allclose(corrupted.pooled, g["plain_pooled"], atol=tol, rtol=0)
    np.testing.assert_allclose(patched.pooled, g["patched_pooled"], atol=tol, rtol=0)
    np.testing.assert_allclose(patched.logits, g["patched_logits"], atol=TOL, rtol=0)
    with pytest.raises(CheckpointError, match="same size"):
        swin_patch_head(ck.config, ck.weights, g["clean_pixels"][:, :16], g["pixels"], heads)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("key", ["script_", "patch_script_"])
def test_the_exported_script_is_the_one_run_and_gives_attnvizs_outputs(models, name, key):
    ck, cls, g = models[name]
    c, w = ck.config, ck.weights
    lay = swin_layout(c, (12, 24))
    rel = "tests/data/checkpoints"
    pixels = np.load(DATA / "tiny_swin" / PIXELS)
    np.testing.assert_array_equal(pixels, g["pixels"])
    patch = [tuple(map(int, h)) for h in g["patch"]]
    if key == "script_":
        ko = {layer: knockout_mask(*lay.grids[layer]) for layer in range(lay.n_layer)}
        text = swin_script(f"{rel}/{name}", f"{rel}/tiny_swin/{PIXELS}", lay.heads, knockout=ko,
                           grids=dict(enumerate(lay.grids)), classifier=cls is not None, **SCRIPT)
        after = swin_run(c, w, pixels, Edit(knockout=ko, **SCRIPT), cls)
    else:
        text = swin_script(f"{rel}/{name}", f"{rel}/tiny_swin/{PIXELS}", lay.heads, patch=patch,
                           clean=f"{rel}/tiny_swin/{CLEAN}", classifier=cls is not None)
        after = swin_patch_head(c, w, np.load(DATA / "tiny_swin" / CLEAN), pixels, patch, cls)[2]
    assert hashlib.sha256(text.encode()).hexdigest() == str(g[f"{key}sha256"])
    compile(text, "hooks.py", "exec")
    before = swin_run(c, w, pixels, classifier=cls)
    tol = TOL * max(1.0, float(np.abs(g[f"{key}pooled_before"]).max()))
    np.testing.assert_allclose(before.pooled, g[f"{key}pooled_before"], atol=tol, rtol=0)
    np.testing.assert_allclose(after.pooled, g[f"{key}pooled_after"], atol=tol, rtol=0)
    assert cosine(before.pooled, after.pooled) == pytest.approx(float(g[f"{key}cosine"]), abs=1e-6)
    assert float(g[f"{key}cosine"]) < 0.9999
    if cls is not None:
        np.testing.assert_allclose(after.logits, g[f"{key}logits_after"], atol=TOL, rtol=0)
    else:
        assert f"{key}logits_after" not in g


def test_the_script_says_what_it_needs():
    with pytest.raises(ValueError, match="clean picture"):
        swin_script("m", "p.npy", [2, 2], patch=[(0, 1)])
    with pytest.raises(ValueError, match="token grid"):
        swin_script("m", "p.npy", [2, 2], knockout={0: np.zeros((4, 4), bool)})
    text = swin_script("m", "p.npy", [2, 2], ablate={(1, 0): np.array([0.5, 0.25])})
    assert "(0, 'set', [0.5, 0.25])" in text and "knock" not in text and "AutoModel." in text
    compile(text, "hooks.py", "exec")


def test_bad_requests_are_one_line(models):
    ck, _cls, g = models["tiny_swin"]
    c, w, x = ck.config, ck.weights, g["pixels"]
    lay = swin_layout(c, (12, 24))
    cases = [
        (Edit(ablate={(1, 2): "zero"}), r"head 2 is out of range for layer 1: its stage \(0\) has 2 heads \(0 to 1\)"),
        (Edit(ablate={(4, 4): "zero"}), r"head 4 is out of range for layer 4: its stage \(2\) has 4 heads \(0 to 3\)"),
        (Edit(ablate={(6, 0): "zero"}), r"layer 6 is out of range: this Swin has 6 layers over all its stages"),
        (Edit(ablate={(0, 0): "half"}), "ablation mode 'half'"),
        (Edit(ablate={(2, 0): np.zeros(4)}), "must be 8 finite numbers"),
        (Edit(scale={(0, 0): float("nan")}), "finite number"),
        (Edit(knockout={2: np.zeros((288, 288), bool)}), r"must be bool \(72, 72\) or \(2, 72, 72\): stage 1 has 6x12"),
        (Edit(knockout={0: np.zeros((288, 288), np.int8)}), "must be bool"),
        (Edit(knockout={9: np.zeros((18, 18), bool)}), "layer 9 is out of range"),
        (Edit(patch_heads={(4, 3): np.zeros((72, 8))}), r"must be \(18, 8\)"),
        (Edit(patch_residual={2: ([0], np.zeros((1, 8)))}), r"\(positions, 16\)"),
    ]
    for edit, message in cases:
        with pytest.raises(CheckpointError, match=message) as err:
            swin_run(c, w, x, edit)
        assert "\n" not in str(err.value)
    assert check_swin_head(lay, 5, 3) == (5, 3)
    assert parse_swin_heads(lay, "0.1, 5.3") == [(0, 1), (5, 3)]
    for text, message in (("0.2", "out of range"), ("x", "not a head"), ("1.1.1", "not a head")):
        with pytest.raises(CheckpointError, match=message):
            parse_swin_heads(lay, text)
    with pytest.raises(CheckpointError, match="is not Swin"):
        vit = load_checkpoint(DATA / "tiny_vit")
        swin_run(vit.config, vit.weights, x)
    with pytest.raises(CheckpointError, match=r"\(channels, height, width\)"):
        swin_run(c, w, x[0])


def test_the_residual_patch_and_the_recorded_heads(models):
    ck, _cls, g = models["tiny_swin"]
    c, w = ck.config, ck.weights
    rec: dict = {}
    clean = swin_run(c, w, g["clean_pixels"], Edit(record=rec))
    assert rec[4].shape == (4, 18, 8) and rec[0].shape == (2, 288, 4)
    rows = clean.stream[2]  # (72, 16) the clean stream entering layer 2 (stage 1's first)
    patched = swin_run(c, w, g["pixels"], Edit(patch_residual={2: (np.arange(72), rows)}))
    np.testing.assert_array_equal(patched.stream[2], rows)
    # every token of stage 1 patched: what follows is the clean pass's
    np.testing.assert_allclose(patched.hidden, clean.hidden, atol=1e-6, rtol=0)


GOLD = Path("/tmp/gold/bin/python")


@pytest.mark.slow
@pytest.mark.skipif(not GOLD.is_file(), reason="no torch and transformers environment at /tmp/gold")
def test_an_export_of_every_kind_together_runs_as_written(models, tmp_path):
    """Given values, a per-head knockout and a patch in one script, run by transformers from its own folder."""
    ck, cls, g = models["tiny_swin_cls"]
    c, w = ck.config, ck.weights
    lay = swin_layout(c, (12, 24))
    values = np.random.default_rng(5).normal(0.0, 0.5, lay.head_dim(2)).astype(np.float32)
    per_head = np.zeros((4, 18, 18), dtype=bool)
    per_head[2] = knockout_mask(3, 6)
    ko = {4: window_knockout(lay, 4, per_head), 1: window_knockout(lay, 1, knockout_mask(12, 24))}
    np.save(tmp_path / "pixels.npy", g["pixels"])
    np.save(tmp_path / "clean.npy", g["clean_pixels"])
    text = swin_script(str(ck.folder), "pixels.npy", lay.heads, ablate={(2, 1): values}, scale={(0, 0): -1.5},
                       knockout=ko, grids={k: lay.grids[k] for k in ko}, patch=[(5, 0)], clean="clean.npy",
                       classifier=True)
    (tmp_path / "hooks.py").write_text(text)
    out = subprocess.run([str(GOLD), "hooks.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1"))
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    rec: dict = {}
    swin_run(c, w, g["clean_pixels"], Edit(record=rec))
    after = swin_run(c, w, g["pixels"], Edit(ablate={(2, 1): values}, scale={(0, 0): -1.5}, knockout=ko,
                                              patch_heads={(5, 0): rec[5][0]}), cls)
    tol = TOL * max(1.0, float(np.abs(after.pooled).max()))
    np.testing.assert_allclose(after.pooled, found["pooled_after"], atol=tol, rtol=0)
    np.testing.assert_allclose(after.logits, found["logits_after"], atol=TOL, rtol=0)
    assert found["cosine"] < 0.999
