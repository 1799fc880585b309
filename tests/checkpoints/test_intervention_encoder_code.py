"""The exported PyTorch hook script of an encoder or a vision model: the script the golden maker ran with transformers
(tools/make_encoder_intervention_goldens.py scripts: ablation, scaling and a knockout together) is, byte for byte,
the one attnviz writes, and the pooled output it printed (and its cosine with the plain one) equals attnviz's own
intervention; the window's export names the right modules, compiles and says what it cannot write."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import load_checkpoint
from attnviz.checkpoints.intervention_code import ENCODER_OUT_PROJ_PATHS, encoder_script
from attnviz.checkpoints.intervention_study import encoder_tokens, export_code
from attnviz.checkpoints.interventions import Edit, cosine, encoder_run
from attnviz.model.state import Interventions

ROOT = DATA.parents[2]
SCRIPT_MODELS = {"tiny_roberta": True, "tiny_xlmr": True, "tiny_electra": True, "tiny_distilbert": True,
                 "tiny_vit": True, "tiny_deit": True, "tiny_dinov2": True, "tiny_clip_vision": True,
                 "tiny_siglip_vision": False}
IDS = [0, 5, 9, 3, 7, 11, 4, 2]  # the golden maker's
ABLATE, SCALE_HEAD, SCALE, KO_FROM, KO_KEY = [(0, 1), (1, 0)], (1, 1), 0.5, 2, 1
PIXELS = "intervention_pixels.npy"
GOLD = Path("/tmp/gold/bin/python")


def edits(n_layer: int, n_head: int, T: int):
    """The golden maker's script edits (its script_edits)."""
    def fit(lh):
        return min(lh[0], n_layer - 1), min(lh[1], n_head - 1)

    ablate = {fit(h): "zero" for h in ABLATE}
    scale = {fit(SCALE_HEAD): SCALE} if fit(SCALE_HEAD) not in ablate else {}
    ko = np.zeros((T, T), bool)
    ko[KO_FROM:, KO_KEY] = True
    return ablate, scale, {layer: ko for layer in range(n_layer)}


def inputs(ck, name):
    rel = f"tests/data/checkpoints/{name}"
    if ck.kind == "vit":
        return np.load(DATA / name / PIXELS), {"pixels": f"{rel}/{PIXELS}"}
    return np.array(IDS), {"ids": IDS}


@pytest.mark.parametrize("name", list(SCRIPT_MODELS))
def test_the_script_run_with_transformers_gives_attnvizs_pooled_output(name):
    g = golden(DATA / name / "golden_encoder_scripts.npz")
    ck = load_checkpoint(DATA / name)
    c = ck.config
    x, kw = inputs(ck, name)
    T = encoder_tokens(c, x)
    assert T == int(g["T"])
    ablate, scale, ko = edits(c.n_layer, c.n_head, T)
    text = encoder_script(f"tests/data/checkpoints/{name}", pooled_first=SCRIPT_MODELS[name], ablate=ablate,
                          scale=scale, knockout=ko, n_layer=c.n_layer, **kw)
    assert hashlib.sha256(text.encode()).hexdigest() == str(g["script_sha256"])
    before = encoder_run(c, ck.weights, x)
    after = encoder_run(c, ck.weights, x, Edit(ablate=ablate, scale=scale, knockout=ko))
    tol = 1e-5 * max(1.0, float(np.abs(g["pooled_before"]).max()))
    np.testing.assert_allclose(before.pooled, g["pooled_before"], atol=tol, rtol=0)
    np.testing.assert_allclose(after.pooled, g["pooled_after"], atol=tol, rtol=0)
    assert cosine(before.pooled, after.pooled) == pytest.approx(float(g["cosine"]), abs=1e-6)
    assert float(g["cosine"]) < 0.999  # the edits did move the pooled output


@pytest.mark.parametrize("name, module", [("tiny_roberta", "encoder.layer.{i}.attention.output.dense"),
                                          ("tiny_vit", "layers.{i}.attention.o_proj")])
def test_the_windows_export_compiles_names_the_modules_and_holds_the_pixels(name, module):
    ck = load_checkpoint(DATA / name)
    c = ck.config
    x, _kw = inputs(ck, name)
    T = encoder_tokens(c, x)
    allowed = np.ones((T, T), bool)
    allowed[KO_FROM:, KO_KEY] = False
    spec = Interventions(heads=((0, 1), (1, 0)), mode="mean", knockout_layers=tuple(range(c.n_layer)))
    code = export_code(str(ck.folder), x, spec, c, allowed=allowed)
    text = code["pytorch"]
    compile(text, "hooks.py", "exec")
    assert module in text and all(p in text for p in ENCODER_OUT_PROJ_PATHS)
    assert "edits = {0: [(1, 'mean', None)], 1: [(0, 'mean', None)]}" in text
    assert "eager_attention_forward" in text and "last_hidden_state" in text and "AutoModel" in text
    if ck.kind == "vit":  # TransformerLens' bridge has no script here; for a RoBERTa it takes the knockout as a mask
        assert code["lens"] == "" and "decoder LLMs" in code["lens_problem"]
    else:
        assert "attention_mask=knock" in code["lens"] and not code["lens_problem"]
    if ck.kind == "vit":
        assert code["pixels"].shape == x.shape and code["pixels_file"] in text and "pixel_values" in text
        np.testing.assert_array_equal(code["pixels"], x)
    else:
        assert "pixels" not in code and f"input_ids\": torch.tensor([{IDS}])" in text


def test_what_the_export_cannot_write_is_said():
    ck = load_checkpoint(DATA / "tiny_albert")  # one attention module shared by the layers of a group
    code = export_code(str(ck.folder), np.array(IDS), Interventions(heads=((0, 0),)), ck.config)
    assert code["pytorch"] == "" and "albert" in code["pytorch_problem"]
    ck = load_checkpoint(DATA / "tiny_roberta")
    T = len(IDS)
    some = Interventions(knockout_layers=(0,))
    code = export_code(str(ck.folder), np.array(IDS), some, ck.config, allowed=np.ones((T, T), bool))
    assert code["pytorch"] == "" and "some layers only" in code["pytorch_problem"]
    heads = Interventions(knockout_layers=(0, 1), knockout_heads=(1,))
    code = export_code(str(ck.folder), np.array(IDS), heads, ck.config, allowed=np.ones((T, T), bool))
    assert code["pytorch"] == "" and "some heads only" in code["pytorch_problem"]


@pytest.mark.slow
@pytest.mark.skipif(not GOLD.is_file(), reason="no torch and transformers environment at /tmp/gold")
def test_the_windows_vision_export_runs_as_saved(tmp_path):
    """The script and its pixels file as the window saves them, run in a folder of their own."""
    ck = load_checkpoint(DATA / "tiny_dinov2")
    c = ck.config
    x = np.load(DATA / "tiny_dinov2" / PIXELS)
    spec = Interventions(heads=((0, 0), (1, 1)), mode="scale", factor=0.25)
    code = export_code(str(ck.folder), x, spec, c)
    (tmp_path / "hooks.py").write_text(code["pytorch"])
    np.save(tmp_path / code["pixels_file"], code["pixels"])
    out = subprocess.run([str(GOLD), "hooks.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TRANSFORMERS_VERBOSITY="error"))
    assert out.returncode == 0, out.stderr[-2000:]
    import json

    found = json.loads(out.stdout.strip().splitlines()[-1])
    after = encoder_run(c, ck.weights, x, Edit(scale={(0, 0): 0.25, (1, 1): 0.25}))
    np.testing.assert_allclose(after.pooled, found["pooled_after"], atol=1e-5, rtol=0)
