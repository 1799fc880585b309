"""Interventions on MarianMT, BART, mBART, T5 (v1.0, v1.1 gated, mT5) and Whisper against PyTorch forward hooks
on transformers' eager model
(tools/make_intervention_goldens.py seq2seq): heads of the encoder's self-attention, the decoder's self-attention
and the cross-attention zeroed, mean-ablated, scaled and patched from a clean source, and edges knocked out in the
encoder and the cross-attention, each within 1e-5 on the logits of every decoder row; bad requests are one line."""

from __future__ import annotations

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.intervention_seq2seq import STACKS, patch_seq2seq_head, seq2seq_run, whisper_run
from attnviz.checkpoints.interventions import Edit
from attnviz.checkpoints.seq2seq_run import run_seq2seq

S2S = DATA.parent  # the tiny encoder-decoders sit beside the checkpoints folder
MODELS = ["tiny_marian", "tiny_bart", "tiny_mbart", "tiny_t5", "tiny_t5_gated", "tiny_t5_mt5"]
WHISPER = ["tiny_whisper", "tiny_whisper_en"]
TOL = 1e-5


@pytest.fixture(scope="module")
def models():
    out = {n: load_checkpoint(S2S / n) for n in MODELS}
    out.update({n: load_checkpoint(DATA / n) for n in WHISPER})
    return out


def _folder(name):
    return DATA / name if name in WHISPER else S2S / name


def _pass(ck, name, g, which, edits=None, dtype=None):
    """The pass over the golden's clean ("src") or corrupted source (ids, or Whisper's features), in the golden's
    precision (T5's and Whisper's goldens are float64: float32's own rounding reaches 1e-5 on their logits)."""
    if dtype is None:
        dtype = np.float64 if "float64" in g and bool(g["float64"]) else np.float32
    if name in WHISPER:
        return whisper_run(ck, g[f"{which}_features"], g["dec_ids"], edits, dtype=dtype)
    return seq2seq_run(ck, g[f"{which}_ids"], g["dec_ids"], edits, dtype=dtype)


@pytest.mark.parametrize("name", MODELS[3:] + WHISPER)
def test_the_windows_float32_pass_is_near_the_float64_hooks(models, name):
    g = golden(_folder(name) / "golden_interventions.npz")
    assert bool(g["float64"])
    heads = [tuple(int(x) for x in h) for h in g["cross_ablate"]]
    after = _pass(models[name], name, g, "src", {"cross": Edit(ablate={h: "zero" for h in heads})}, np.float32)
    np.testing.assert_allclose(after.logits, g["cross_zero"], atol=5e-5, rtol=0)


@pytest.mark.parametrize("name", MODELS + WHISPER)
@pytest.mark.parametrize("stack", STACKS)
def test_every_intervention_matches_forward_hooks(models, name, stack):
    g = golden(_folder(name) / "golden_interventions.npz")
    ck = models[name]
    plain = _pass(ck, name, g, "src")
    np.testing.assert_allclose(plain.logits, g["plain"], atol=TOL, rtol=0)
    heads = [tuple(int(x) for x in h) for h in g[f"{stack}_ablate"]]
    for mode in ("zero", "mean"):
        after = _pass(ck, name, g, "src", {stack: Edit(ablate={h: mode for h in heads})})
        assert np.abs(g[f"{stack}_{mode}"] - g["plain"]).max() > 1e-4  # the hooks did change the pass
        np.testing.assert_allclose(after.logits, g[f"{stack}_{mode}"], atol=TOL, rtol=0)
    sh = tuple(int(x) for x in g[f"{stack}_scale_head"])
    scaled = _pass(ck, name, g, "src", {stack: Edit(scale={sh: float(g["scale"])})})
    np.testing.assert_allclose(scaled.logits, g[f"{stack}_scaled"], atol=TOL, rtol=0)
    layer, head = (int(x) for x in g[f"{stack}_patch"])
    if name in WHISPER or "float64" in g:
        rec = Edit(record={})
        _pass(ck, name, g, "src", {stack: rec})
        corrupted = _pass(ck, name, g, "corrupted")
        patched = _pass(ck, name, g, "corrupted", {stack: Edit(patch_heads={(layer, head): rec.record[layer][head]})})
    else:
        _clean, corrupted, patched = patch_seq2seq_head(ck, g["src_ids"], g["corrupted_ids"], g["dec_ids"], stack,
                                                        layer, head)
    np.testing.assert_allclose(corrupted.logits, g["corrupted"], atol=TOL, rtol=0)
    np.testing.assert_allclose(patched.logits, g[f"{stack}_patched"], atol=TOL, rtol=0)
    if f"{stack}_knockout" in g:
        start, key = (int(x) for x in g[f"{stack}_ko"])
        S, T = plain.encoder.shape[-1], plain.decoder.shape[-1]
        rows, cols = (S, S) if stack == "encoder" else (T, S)
        ko = np.zeros((rows, cols), bool)
        ko[start:, key] = True
        L = plain.encoder.shape[0] if stack == "encoder" else plain.cross.shape[0]
        res = _pass(ck, name, g, "src", {stack: Edit(knockout={layer: ko for layer in range(L)})})
        np.testing.assert_allclose(res.logits, g[f"{stack}_knockout"], atol=TOL, rtol=0)
        maps = res.encoder if stack == "encoder" else res.cross
        assert np.all(maps[:, :, start:, key] == 0)
        np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-5)  # rows renormalised


def test_the_plain_pass_is_the_translation_views_pass(models):
    ck = models["tiny_marian"]
    r = run_seq2seq(ck, "hello world", "bonjour")
    p = seq2seq_run(ck, r.encoder_ids, r.decoder_ids)
    np.testing.assert_array_equal(p.encoder, r.encoder_attentions)
    np.testing.assert_array_equal(p.decoder, r.decoder_attentions)
    np.testing.assert_array_equal(p.cross, r.cross_attentions)


@pytest.mark.parametrize("edits, message", [
    ({"encoder": Edit(ablate={(0, 9): "zero"})}, "head 9 is out of range"),
    ({"decoder": Edit(ablate={(5, 0): "zero"})}, "layer 5 is out of range"),
    ({"cross": Edit(knockout={0: np.zeros((3, 3), bool)})}, r"must be bool \(4, 5\)"),
    ({"self": Edit()}, "not an attention of the model"),
    ({"cross": Edit(ablate={(0, 0): "half"})}, "ablation mode"),
])
def test_bad_requests_are_one_line(models, edits, message):
    with pytest.raises(CheckpointError, match=message):
        seq2seq_run(models["tiny_bart"], [0, 5, 9, 7, 2], [2, 0, 69, 264], edits)


def test_a_patch_needs_sources_of_one_length(models):
    with pytest.raises(CheckpointError, match="same length"):
        patch_seq2seq_head(models["tiny_bart"], [0, 5, 9, 2], [0, 5, 2], [2, 0], "cross", 0, 0)
