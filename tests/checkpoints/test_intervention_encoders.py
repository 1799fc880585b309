"""Interventions on encoders and vision models against PyTorch forward hooks on transformers' eager model
(tools/make_encoder_intervention_goldens.py): zero and mean ablation, scaling a head and knocking out edges,
each within 1e-5 (relative to the largest value) on the last hidden state; the pooled-output cosine, the
class-token overlay, the importance sweep and bad requests."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.intervention_study import encoder_study, sweep
from attnviz.checkpoints.interventions import Edit, cosine, encoder_run

MODELS = ["tiny_roberta", "tiny_distilbert", "tiny_vit", "tiny_dinov2", "tiny_clip_vision"]
TOL = 1e-5


def spec(**kw):
    base = dict(heads=(), mode="zero", factor=1.0, knockout_layers=(), knockout_heads=(), patch="none",
                patch_layer=0, patch_head=0, patch_positions=(), clean="")
    base.update(kw)
    return SimpleNamespace(**base)


@pytest.fixture(scope="module")
def models():
    return {n: load_checkpoint(DATA / n) for n in MODELS}


@pytest.mark.parametrize("name", MODELS)
def test_every_intervention_matches_forward_hooks(models, name):
    g = golden(DATA / name / "golden_encoder_interventions.npz")
    ck = models[name]
    c, w, x = ck.config, ck.weights, g["inputs"]
    tol = TOL * max(1.0, float(np.abs(g["plain"]).max()))  # float32 rounding grows with the values (CLIP: ~12)
    heads = [tuple(h) for h in g["ablate"]]
    plain = encoder_run(c, w, x)
    np.testing.assert_allclose(plain.hidden, g["plain"], atol=tol, rtol=0)
    for mode in ("zero", "mean"):
        after = encoder_run(c, w, x, Edit(ablate={h: mode for h in heads}))
        assert np.abs(g[mode] - g["plain"]).max() > 1e-3  # the golden's hooks did change the pass
        np.testing.assert_allclose(after.hidden, g[mode], atol=tol, rtol=0)
    scaled = encoder_run(c, w, x, Edit(scale={tuple(g["scale_head"]): float(g["scale"])}))
    np.testing.assert_allclose(scaled.hidden, g["scaled"], atol=tol, rtol=0)
    T = g["plain"].shape[0]
    ko = np.zeros((T, T), bool)
    ko[int(g["ko_from"]):, int(g["ko_key"])] = True
    res = encoder_run(c, w, x, Edit(knockout={layer: ko for layer in range(c.n_layer)}))
    np.testing.assert_allclose(res.hidden, g["knockout"], atol=tol, rtol=0)
    assert np.all(res.attentions[:, :, int(g["ko_from"]):, int(g["ko_key"])] == 0)
    np.testing.assert_allclose(res.attentions.sum(-1), 1.0, atol=1e-5)  # rows renormalised
    assert plain.stream.shape == (c.n_layer + 1, T, c.d_model)


@pytest.mark.parametrize("name", ["tiny_roberta", "tiny_vit"])
def test_study_reports_the_pooled_cosine_and_every_token(models, name):
    g = golden(DATA / name / "golden_encoder_interventions.npz")
    ck = models[name]
    eff = encoder_study(ck.config, ck.weights, g["inputs"], spec(heads=((0, 1), (1, 0)), mode="zero"))
    ref = cosine(g["plain"][0], g["zero"][0])  # the class token ([CLS] / <s>, ViT's class token) of the goldens
    assert eff.cosine == pytest.approx(ref, abs=1e-5) and eff.cosine < 0.999
    assert eff.token_cosine.shape == (g["plain"].shape[0],)
    assert eff.token_cosine[0] == pytest.approx(eff.cosine, abs=1e-12)
    assert eff.residual_change[0] == 0 and eff.residual_change[-1] > 0  # nothing changes before layer 0
    assert eff.applied == ("0.1, 1.0 zero-ablated",)
    none = encoder_study(ck.config, ck.weights, g["inputs"], spec())
    assert none.cosine == pytest.approx(1.0, abs=1e-12) and none.applied == ()


def test_vision_overlay_is_the_class_tokens_row_over_the_patches(models):
    ck = models["tiny_dinov2"]
    g = golden(DATA / "tiny_dinov2" / "golden_encoder_interventions.npz")
    T = g["plain"].shape[0]
    allowed = np.ones((T, T), bool)
    allowed[0, 5] = False  # the class token may not see patch 4 (token 5)
    eff = encoder_study(ck.config, ck.weights, g["inputs"], spec(knockout_layers=(1,), knockout_heads=(0,)),
                        allowed=allowed)
    assert eff.has_overlay
    before, after = eff.overlay(1, 0)
    gh, gw = eff.before.grid
    assert before.shape == (gh, gw) and after.shape == (gh, gw)
    np.testing.assert_allclose(before.ravel(), eff.before.attentions[1, 0, 0, 1:], rtol=0, atol=0)
    assert after.ravel()[4] == 0 and before.ravel()[4] > 0
    np.testing.assert_allclose(after.sum(), before.sum() + eff.before.attentions[1, 0, 0, 0]
                               - eff.after.attentions[1, 0, 0, 0], atol=1e-5)
    b1, a1 = eff.overlay(1, 1)  # the other head is not knocked out: the same weights, to float32 rounding (a pass
    np.testing.assert_allclose(a1, b1, atol=1e-6, rtol=0)  # with a per-head mask may take another kernel path)
    assert not encoder_study(models["tiny_roberta"].config, models["tiny_roberta"].weights,
                             np.array([0, 5, 2]), spec()).has_overlay


def test_sweep_ranks_heads_by_the_cosine_and_refuses_next_token_metrics(models):
    ck = models["tiny_vit"]
    c, w = ck.config, ck.weights
    x = golden(DATA / "tiny_vit" / "golden_encoder_interventions.npz")["inputs"]
    res = sweep(c, w, x, metric="cosine")
    assert res.complete and res.grid.shape == (c.n_layer, c.n_head)
    one = encoder_study(c, w, x, spec(heads=((1, 0),)))
    assert res.grid[1, 0] == pytest.approx(1.0 - one.cosine, abs=1e-12)
    assert (res.grid >= 0).all() and res.grid.max() > 0
    with pytest.raises(CheckpointError, match="cosine of its pooled output"):
        sweep(c, w, x, metric="kl")
    dec = load_checkpoint(DATA / "tiny_qwen2")
    with pytest.raises(CheckpointError, match="measures encoders and vision models"):
        sweep(dec.config, dec.weights, [1, 2, 3], metric="cosine")


def test_bad_requests_are_one_line(models):
    ck = models["tiny_roberta"]
    c, w = ck.config, ck.weights
    ids = np.array([0, 5, 9, 2])
    with pytest.raises(CheckpointError, match="head 7 is out of range"):
        encoder_study(c, w, ids, spec(heads=((0, 7),)))
    with pytest.raises(CheckpointError, match="the prompt has 4"):
        encoder_study(c, w, ids, spec(knockout_layers=(0,)), allowed=np.ones((3, 3), bool))
    with pytest.raises(CheckpointError, match="runs on decoder LLMs"):
        encoder_study(c, w, ids, spec(patch="head"))
    with pytest.raises(CheckpointError, match="embedding table"):
        encoder_run(c, w, np.array([0, 10 ** 6]))
    with pytest.raises(CheckpointError, match="not an encoder"):
        dec = load_checkpoint(DATA / "tiny_qwen2")
        encoder_run(dec.config, dec.weights, np.array([1, 2]))


def test_cli_ablate_on_an_encoder_and_a_vision_model(models, tmp_path, capsys):
    from PIL import Image

    from attnviz.checkpoints.preprocess import preprocess_image
    from attnviz.cli import main
    from attnviz.sources.image import load_image

    ck = models["tiny_roberta"]
    out = tmp_path / "e.npz"
    assert main(["model", "ablate", str(DATA / "tiny_roberta"), "--text", "the river bank", "--heads", "0.1,1.0",
                 "--npz", str(out)]) == 0
    ids = ck.tokenizer.encode("the river bank", add_special_tokens=True, max_tokens=ck.config.max_tokens).ids
    ref = encoder_run(ck.config, ck.weights, ids, Edit(ablate={(0, 1): "zero", (1, 0): "zero"}))
    plain = encoder_run(ck.config, ck.weights, ids)
    with np.load(out) as z:
        np.testing.assert_array_equal(z["hidden_after"], ref.hidden)
        np.testing.assert_array_equal(z["hidden_before"], plain.hidden)
        assert float(z["cosine"]) == pytest.approx(cosine(plain.pooled, ref.pooled), abs=1e-12)
        assert float(z["cosine"]) < 1
    assert "zero-ablated 0.1, 1.0" in capsys.readouterr().out
    rgb = (np.arange(48 * 80 * 3).reshape(48, 80, 3) % 251).astype(np.uint8)
    Image.fromarray(rgb).save(tmp_path / "p.png")
    vit = models["tiny_vit"]
    out = tmp_path / "v.npz"
    assert main(["model", "ablate", str(DATA / "tiny_vit"), "--image", str(tmp_path / "p.png"), "--heads", "1.1",
                 "--mode", "mean", "--npz", str(out)]) == 0
    x = preprocess_image(load_image(tmp_path / "p.png", alpha="drop"), vit.image)
    ref = encoder_run(vit.config, vit.weights, x, Edit(ablate={(1, 1): "mean"}))
    with np.load(out) as z:
        np.testing.assert_array_equal(z["hidden_after"], ref.hidden)
    for argv, message in (
        (["model", "ablate", str(DATA / "tiny_vit"), "--text", "hi", "--heads", "0.0"], "give --image, not --text"),
        (["model", "ablate", str(DATA / "tiny_roberta"), "--image", str(tmp_path / "p.png"), "--heads", "0.0"],
         "give --text, not --image"),
        (["model", "ablate", str(DATA / "tiny_roberta"), "--text", "hi", "--heads", "0.9"], "head 9 is out of range"),
        (["model", "ablate", str(DATA / "tiny_qwen2"), "--image", str(tmp_path / "p.png"), "--heads", "0.0"],
         "reads --text"),
    ):
        assert main([*argv, "--npz", str(tmp_path / "x.npz")]) == 1
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and err.count("\n") == 1, err
