"""The exported TransformerLens script of a BERT-family encoder: the scripts the golden maker ran with TransformerLens 4
(tools/make_encoder_intervention_goldens.py lens: a head zeroed, one mean-ablated, one scaled; and heads set to
given means) are, byte for byte, the ones attnviz writes, and the class token's output they printed before and
after equals attnviz's own intervention to 1e-5 (a knockout too, as a 4-D attention mask); the window's export
holds that script for BERT, RoBERTa and XLM-R and says precisely why not for the other encoders and vision
models."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import load_checkpoint
from attnviz.checkpoints.intervention_code import LENS_ENCODER_ADAPTERS, lens_encoder_script
from attnviz.checkpoints.intervention_study import export_code
from attnviz.checkpoints.interventions import Edit, cosine, encoder_run
from attnviz.model.state import Interventions

ROOT = DATA.parents[2]
LENS_MODELS = {"tiny_roberta": "RobertaForMaskedLM", "tiny_xlmr": "RobertaForMaskedLM"}  # the golden maker's
IDS = [0, 5, 9, 3, 7, 11, 4, 2]
ABLATE = {(0, 1): "zero", (1, 0): "mean"}
SCALE = {(1, 1): 0.5}
KO_FROM, KO_KEY = 2, 1  # the knockout: query rows from KO_FROM on may not see key KO_KEY, in every layer
TLENS = Path("/tmp/tlens/bin/python")  # a throw-away venv with transformer_lens 4


def check(ck, g, prefix, ablate, scale, knockout=None):
    c = ck.config
    x = np.array(IDS)
    before = encoder_run(c, ck.weights, x)
    after = encoder_run(c, ck.weights, x, Edit(ablate=ablate, scale=scale, knockout=knockout or {}))
    tol = 1e-5 * max(1.0, float(np.abs(g[f"{prefix}pooled_before"]).max()))
    np.testing.assert_allclose(before.pooled, g[f"{prefix}pooled_before"], atol=tol, rtol=0)
    np.testing.assert_allclose(after.pooled, g[f"{prefix}pooled_after"], atol=tol, rtol=0)
    assert cosine(before.pooled, after.pooled) == pytest.approx(float(g[f"{prefix}cosine"]), abs=1e-6)
    assert float(g[f"{prefix}cosine"]) < 0.99  # the edits did move the class token's output


@pytest.mark.parametrize("name", list(LENS_MODELS))
def test_the_lens_script_run_with_transformer_lens_gives_attnvizs_output(name):
    g = golden(DATA / name / "golden_encoder_lens.npz")
    ck = load_checkpoint(DATA / name)
    assert LENS_ENCODER_ADAPTERS[ck.config.model_type] == LENS_MODELS[name]
    rel = f"tests/data/checkpoints/{name}"
    text = lens_encoder_script(rel, IDS, LENS_MODELS[name], ablate=ABLATE, scale=SCALE)
    assert hashlib.sha256(text.encode()).hexdigest() == str(g["sha256"])
    check(ck, g, "", ABLATE, SCALE)
    means = g["means"]
    given = {(0, 1): means[0, 1], (1, 0): means[1, 0]}
    text = lens_encoder_script(rel, IDS, LENS_MODELS[name], ablate=given)
    assert hashlib.sha256(text.encode()).hexdigest() == str(g["means_sha256"])
    check(ck, g, "means_", given, {})
    ko = np.zeros((len(IDS), len(IDS)), bool)
    ko[KO_FROM:, KO_KEY] = True
    kos = {layer: ko for layer in range(ck.config.n_layer)}
    text = lens_encoder_script(rel, IDS, LENS_MODELS[name], ablate={(0, 1): "zero"}, knockout=kos,
                               n_layer=ck.config.n_layer)
    assert hashlib.sha256(text.encode()).hexdigest() == str(g["knockout_sha256"])
    check(ck, g, "knockout_", {(0, 1): "zero"}, {}, kos)
    alone = encoder_run(ck.config, ck.weights, np.array(IDS), Edit(ablate={(0, 1): "zero"})).pooled
    assert np.abs(alone - g["knockout_pooled_after"]).max() > 1e-3  # the knockout did count


def test_the_windows_export_holds_the_lens_script():
    ck = load_checkpoint(DATA / "tiny_roberta")
    c = ck.config
    spec = Interventions(heads=((0, 1), (1, 0)), mode="scale", factor=0.25)
    code = export_code(str(ck.folder), np.array(IDS), spec, c)
    want = lens_encoder_script(str(ck.folder), IDS, "RobertaForMaskedLM", scale={(0, 1): 0.25, (1, 0): 0.25})
    assert code["lens"] == want and code["lens_problem"] == "" and code["pytorch"]
    compile(code["lens"], "lens.py", "exec")
    assert "blocks.{layer}.attn.hook_z" in want and "TransformerBridge.boot_transformers" in want
    # heads set to a corpus's means: the values are written in
    means = np.random.default_rng(3).normal(size=(c.n_layer, c.n_head, c.head_size))
    code = export_code(str(ck.folder), np.array(IDS), Interventions(heads=((1, 1),), mode="mean"), c, means=means)
    assert "torch.tensor(factor" in code["lens"] and repr(float(means[1, 1, 0])) in code["lens"]


def test_what_has_no_lens_script_is_said():
    T = len(IDS)
    heads = Interventions(heads=((0, 1),))
    for name, family in (("tiny_electra", "electra"), ("tiny_distilbert", "distilbert")):
        ck = load_checkpoint(DATA / name)
        code = export_code(str(ck.folder), np.array(IDS), heads, ck.config)
        assert code["lens"] == "" and code["pytorch"]
        assert f"no adapter for {family}" in code["lens_problem"] and "HookedEncoder" in code["lens_problem"]
    ck = load_checkpoint(DATA / "tiny_roberta")
    allowed = np.ones((T, T), bool)
    allowed[KO_FROM:, KO_KEY] = False
    ko = Interventions(heads=((0, 1),), knockout_layers=(0, 1))
    code = export_code(str(ck.folder), np.array(IDS), ko, ck.config, allowed=allowed)
    assert code["lens_problem"] == "" and "attention_mask=knock" in code["lens"]
    assert "for i, j in [[2, 1], [3, 1], [4, 1], [5, 1], [6, 1], [7, 1]]:" in code["lens"]
    some = Interventions(knockout_layers=(0, 1), knockout_heads=(1,))
    code = export_code(str(ck.folder), np.array(IDS), some, ck.config, allowed=allowed)
    assert code["lens"] == "" and "some heads only" in code["lens_problem"]
    code = export_code(str(ck.folder), np.array(IDS), Interventions(knockout_layers=(0,)), ck.config, allowed=allowed)
    assert code["lens"] == "" and "some layers only" in code["lens_problem"]
    vit = load_checkpoint(DATA / "tiny_vit")
    pixels = np.load(DATA / "tiny_vit" / "intervention_pixels.npy")
    code = export_code(str(vit.folder), pixels, heads, vit.config)
    assert code["lens"] == "" and "BERT, RoBERTa and XLM-R" in code["lens_problem"]


@pytest.mark.slow
@pytest.mark.skipif(not TLENS.is_file(), reason="no transformer_lens environment at /tmp/tlens")
def test_the_windows_lens_export_runs_as_saved(tmp_path):
    ck = load_checkpoint(DATA / "tiny_xlmr")
    c = ck.config
    spec = Interventions(heads=((0, 0), (1, 1)), mode="mean")
    code = export_code(str(ck.folder), np.array(IDS), spec, c)
    (tmp_path / "lens.py").write_text(code["lens"])
    out = subprocess.run([str(TLENS), "lens.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1"))
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    after = encoder_run(c, ck.weights, np.array(IDS), Edit(ablate={(0, 0): "mean", (1, 1): "mean"}))
    np.testing.assert_allclose(after.pooled, found["pooled_after"], atol=1e-5, rtol=0)
    assert found["cosine"] < 0.9999
