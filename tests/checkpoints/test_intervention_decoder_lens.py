"""The exported TransformerLens script of a decoder LLM: the scripts tools/make_decoder_lens_goldens.py ran as
written with TransformerLens 4 (heads zeroed; heads mean-ablated and one scaled; heads zeroed with a knockout as
a 4-D attention mask) are, byte for byte, the ones
attnviz writes, and the last position's logits they printed equal attnviz's own intervention; the window's export
holds that script, and says precisely why not for the models TransformerLens's bridge refuses."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import load_checkpoint
from attnviz.checkpoints.intervention_code import lens_script
from attnviz.checkpoints.intervention_study import LENS_DECODER_TYPES, export_code
from attnviz.checkpoints.interventions import Edit, run
from attnviz.model.state import Interventions

sys.path.insert(0, str(DATA.parents[2] / "tools"))
from make_decoder_lens_goldens import CLEAN, KNOCKOUT_MODELS, edits, knockout  # noqa: E402  (the golden maker's)

GOLDENS = sorted(p.parent.name for p in DATA.glob("*/golden_lens.npz"))
# tiny_gemma2's soft-capped scores magnify BLAS rounding (as for its other interventions)
ATOL = {"tiny_gemma2": 7.5e-5}
TLENS = Path("/tmp/tlens/bin/python")  # a throw-away venv with transformer_lens 4


def test_every_checked_family_has_a_golden():
    types = {json.loads((DATA / n / "config.json").read_text())["model_type"] for n in GOLDENS}
    assert set(LENS_DECODER_TYPES) <= types and len(GOLDENS) >= len(LENS_DECODER_TYPES)


@pytest.mark.parametrize("name", GOLDENS)
def test_the_lens_script_run_with_transformer_lens_gives_attnvizs_logits(name):
    g = golden(DATA / name / "golden_lens.npz")
    ck = load_checkpoint(DATA / name)
    c = ck.config
    assert export_code(str(ck.folder), CLEAN, Interventions(heads=((0, 0),)), c)["lens_problem"] == ""
    zero, mean, scale = edits(c.n_head)
    rel = f"tests/data/checkpoints/{name}"
    plain = run(c, ck.weights, np.array(CLEAN)).logits
    for key, ablate, sc in (("zero", zero, {}), ("mean", mean, scale)):
        text = lens_script(rel, CLEAN, ablate=ablate, scale=sc)
        assert hashlib.sha256(text.encode()).hexdigest() == str(g[f"{key}_sha256"])
        ours = run(c, ck.weights, np.array(CLEAN), Edit(ablate=ablate, scale=sc)).logits
        np.testing.assert_allclose(ours, g[f"{key}_logits"], atol=ATOL.get(name, 1e-5), rtol=0)
        assert np.abs(ours - plain).max() > 0.1  # the edits did move the prediction
    if name in KNOCKOUT_MODELS:
        ko = knockout(c.n_layer)
        text = lens_script(rel, CLEAN, ablate=zero, knockout=ko, n_layer=c.n_layer)
        assert hashlib.sha256(text.encode()).hexdigest() == str(g["knockout_sha256"])
        ours = run(c, ck.weights, np.array(CLEAN), Edit(ablate=zero, knockout=ko)).logits
        np.testing.assert_allclose(ours, g["knockout_logits"], atol=ATOL.get(name, 1e-5), rtol=0)
        assert np.abs(ours - g["zero_logits"]).max() > 1e-3  # the knockout did count (GPT-2: 6.8e-3)


def test_the_windows_export_holds_the_script_and_names_what_the_bridge_refuses():
    ck = load_checkpoint(DATA / "tiny_gpt2")
    spec = Interventions(heads=((0, 1), (1, 0)), mode="scale", factor=0.25)
    code = export_code(str(ck.folder), CLEAN, spec, ck.config)
    assert code["lens"] == lens_script(str(ck.folder), CLEAN, scale={(0, 1): 0.25, (1, 0): 0.25})
    assert "TransformerBridge.boot_transformers" in code["lens"] and "json.dumps" in code["lens"]
    compile(code["lens"], "lens.py", "exec")
    T = len(CLEAN)
    allowed = np.tril(np.ones((T, T), bool))
    allowed[3:, 1] = False
    ko = Interventions(heads=((0, 1),), knockout_layers=(0, 1))
    code = export_code(str(ck.folder), CLEAN, ko, ck.config, allowed=allowed)
    assert "attention_mask=mask, fwd_hooks=hooks" in code["lens"] and code["lens_problem"] == ""
    bloom = load_checkpoint(DATA / "tiny_bloom")  # ALiBi comes from the mask: no 4-D mask form
    code = export_code(str(bloom.folder), CLEAN, ko, bloom.config, allowed=allowed)
    assert code["lens"] == code["pytorch"] == "" and code["lens_problem"] == code["pytorch_problem"] != ""
    for name, words in (("tiny_phi", "qk_layernorm"), ("tiny_falcon", "key-value head")):
        ck = load_checkpoint(DATA / name)
        code = export_code(str(ck.folder), CLEAN, Interventions(heads=((0, 0),)), ck.config)
        assert code["lens"] == "" and code["pytorch"] and words in code["lens_problem"], code["lens_problem"]


@pytest.mark.slow
@pytest.mark.skipif(not TLENS.is_file(), reason="no transformer_lens environment at /tmp/tlens")
def test_the_windows_lens_export_runs_as_saved(tmp_path):
    ck = load_checkpoint(DATA / "tiny_qwen2")
    c = ck.config
    means = np.random.default_rng(5).normal(0, 0.5, (c.n_layer, c.n_head, c.decoder.head_dim))
    code = export_code(str(ck.folder), CLEAN, Interventions(heads=((1, 1),), mode="mean"), c, means=means)
    (tmp_path / "lens.py").write_text(code["lens"])
    out = subprocess.run([str(TLENS), "lens.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1"))
    assert out.returncode == 0, out.stderr[-2000:]
    found = np.array(json.loads(out.stdout.strip().splitlines()[-1]))
    ours = run(c, ck.weights, np.array(CLEAN), Edit(ablate={(1, 1): means[1, 1]})).logits
    np.testing.assert_allclose(ours, found, atol=1e-5, rtol=0)
    assert np.abs(ours - run(c, ck.weights, np.array(CLEAN)).logits).max() > 0.1
