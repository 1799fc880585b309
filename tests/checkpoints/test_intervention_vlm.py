"""Interventions on vision-language models (PaliGemma's prefix-LM, PaliGemma 2's soft caps and sliding window,
LLaVA, SmolVLM with two pictures) against PyTorch
forward hooks on transformers' eager model (tools/make_vlm_intervention_goldens.py): zero and mean ablation,
scaling, a head and a residual patch from a clean prompt, knockouts in every head and in one, each within 1e-5 on
the last position's logits; the exported hook scripts as that tool ran them; the overlay; the sweep; bad
requests; the command line."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.intervention_vlm import export_vlm_code, vlm_study, vlm_sweep
from attnviz.checkpoints.interventions import kl_divergence
from attnviz.cli import main
from attnviz.model.state import Interventions
from attnviz.sources.image import load_image

NAMES = ["tiny_paligemma", "tiny_paligemma2", "tiny_llava", "tiny_smolvlm"]
TOL = 1e-5
# the scripts run transformers in float32 as written: its plain pass over tiny_smolvlm's 79 tokens is itself 8.2e-6
# from the float64 one the hook goldens hold (ours 5.5e-6; 1.2e-5 apart), so the scripts' plain logits are compared
# at the sum of the two there; every edited pass within 1e-5 (measured at most 6.9e-6)
SCRIPT_TOL = {"tiny_paligemma": TOL, "tiny_paligemma2": TOL, "tiny_llava": TOL, "tiny_smolvlm": 1.4e-5}


@pytest.fixture(scope="module")
def vlms():
    out = {}
    for name in NAMES:
        g = golden(DATA / name / "golden_interventions.npz")
        ck = load_checkpoint(DATA / name)
        images = [load_image(DATA / name / str(p), alpha="drop") for p in g["pictures"]]
        out[name] = (ck, images, g, ck.run(images, str(g["prompt"])))
    return out


def specs(g, n_layer: int) -> dict:
    """The golden's cases as the window's interventions (spec, knockout mask or None)."""
    heads = tuple(tuple(int(x) for x in h) for h in g["ablate"])
    T = g["input_ids"].size
    allowed = ~g["knockout_removed"]
    last = tuple(range(T - int(g["residual_last"]), T))
    ko_layer, ko_head = (int(x) for x in g["knockout_head"])
    clean = str(g["clean_prompt"])
    return {
        "zero": (Interventions(heads=heads, mode="zero"), None),
        "mean": (Interventions(heads=heads, mode="mean"), None),
        "scale": (Interventions(heads=tuple(tuple(int(x) for x in h) for h in g["scale"]), mode="scale",
                                factor=float(g["factor"])), None),
        "patch_head": (Interventions(patch="head", patch_layer=int(g["patch_head"][0]),
                                     patch_head=int(g["patch_head"][1]), clean=clean), None),
        "patch_residual": (Interventions(patch="residual", patch_layer=int(g["residual_layer"]), patch_positions=last,
                                         clean=clean), None),
        "knockout": (Interventions(knockout_layers=tuple(range(n_layer))), allowed),
        "knockout_head": (Interventions(knockout_layers=(ko_layer,), knockout_heads=(ko_head,)), allowed),
    }


@pytest.mark.parametrize("name", NAMES)
def test_every_intervention_matches_forward_hooks(vlms, name):
    ck, images, g, res = vlms[name]
    c = ck.spec.text
    for case, (spec, allowed) in specs(g, c.n_layer).items():
        e = vlm_study(ck, images, str(g["prompt"]), spec, allowed=allowed, clean_text=str(g["clean_prompt"]),
                      result=res)
        np.testing.assert_array_equal(e.ids, g["input_ids"])
        np.testing.assert_allclose(e.before.logits, g["logits_plain"], rtol=0, atol=TOL, err_msg=case)
        np.testing.assert_allclose(e.after.logits, g[f"logits_{case}"], rtol=0, atol=TOL, err_msg=case)
        assert e.kl == pytest.approx(kl_divergence(e.before.logits, e.after.logits)) and e.kl > 1e-4, case
        if case.startswith("patch"):
            np.testing.assert_array_equal(g["clean_input_ids"].size, e.clean.stream.shape[1])
    plain = golden(DATA / name / "golden.npz")["attentions"]
    np.testing.assert_allclose(e.before.attentions, plain, rtol=0, atol=TOL)


SCRIPT_CASES = ("edits", "scale", "patch_head", "patch_residual")


def script_spec(case: str, g, n_layer: int):
    """The intervention each of the goldens tool's scripts holds (see its script_edits)."""
    s = specs(g, n_layer)
    ko_layer, ko_head = (int(x) for x in g["knockout_head"])
    if case == "edits":
        return Interventions(heads=s["zero"][0].heads, mode="zero", knockout_layers=(ko_layer,),
                             knockout_heads=(ko_head,)), ~g["knockout_removed"]
    if case == "scale":
        return Interventions(heads=s["scale"][0].heads, mode="scale", factor=float(g["factor"]),
                             knockout_layers=tuple(range(n_layer))), ~g["knockout_removed"]
    if case == "patch_head":
        p = s["patch_head"][0]
        return Interventions(heads=s["zero"][0].heads, mode="mean", patch="head", patch_layer=p.patch_layer,
                             patch_head=p.patch_head, clean=p.clean), None
    return s["patch_residual"][0], None


@pytest.mark.parametrize("name", NAMES)
def test_exported_script_is_the_one_run_and_its_logits_are_ours(vlms, name):
    ck, images, g, res = vlms[name]
    rel = f"tests/data/checkpoints/{name}"
    files = [f"{rel}/{p}" for p in g["pictures"]]
    for case in SCRIPT_CASES:
        spec, allowed = script_spec(case, g, ck.spec.text.n_layer)
        out = export_vlm_code(rel, images, str(g["prompt"]), spec, ck, allowed=allowed,
                              clean_text=str(g["clean_prompt"]), image_files=files)
        assert out["pytorch_problem"] == "" and out["lens"] == "" and out["lens_problem"], case
        text = out["pytorch"]
        assert hashlib.sha256(text.encode("utf-8")).hexdigest() == str(g[f"script_{case}_sha256"]), case
        assert "AutoModelForImageTextToText" in text and "AutoProcessor" in text and "register_forward_pre_hook" in text
        e = vlm_study(ck, images, str(g["prompt"]), spec, allowed=allowed, clean_text=str(g["clean_prompt"]),
                      result=res)
        # both passes are float32 (the script's ran on the machine that made the golden): 1e-5 of the logits' scale
        scale = max(1.0, float(np.abs(g[f"script_{case}_after"]).max()))
        tol = SCRIPT_TOL[name] * scale
        np.testing.assert_allclose(e.before.logits, g[f"script_{case}_before"], rtol=0, atol=tol, err_msg=case)
        np.testing.assert_allclose(e.after.logits, g[f"script_{case}_after"], rtol=0, atol=TOL * scale, err_msg=case)


def test_export_says_what_it_cannot_write(vlms):
    ck, images, g, _res = vlms["tiny_llava"]
    T = g["input_ids"].size
    allowed = np.ones((T, T), dtype=bool)
    allowed[-1] = False  # the last query keeps no key: transformers would spread its weight over the removed ones
    out = export_vlm_code("x", images, str(g["prompt"]), Interventions(knockout_layers=(0,)), ck, allowed=allowed)
    assert out["pytorch"] == "" and "no key" in out["pytorch_problem"]
    with pytest.raises(CheckpointError, match="the mask is 3 x 3 tokens, the prompt has 28"):
        export_vlm_code("x", images, str(g["prompt"]), Interventions(knockout_layers=(0,)), ck,
                        allowed=np.ones((3, 3), bool))


def test_overlay_draws_the_query_row_over_the_picture(vlms):
    ck, images, g, res = vlms["tiny_paligemma"]
    spec, allowed = specs(g, ck.spec.text.n_layer)["knockout"]
    e = vlm_study(ck, images, str(g["prompt"]), spec, allowed=allowed, result=res)
    group = e.patches[0]
    before, after = e.overlay(0, 2, -1)
    assert before.shape == after.shape == group.grid
    np.testing.assert_array_equal(before, group.token_map(e.before.attentions[0, 2, -1].astype(np.float64)))
    removed = g["knockout_removed"][-1][group.tokens].reshape(group.grid)  # the last query's knocked-out keys
    assert removed.any() and (after[removed] == 0).all() and (before[removed] > 0).all()
    # layer 0 reads the same input: its row is the plain one renormalised over the keys left
    row = e.before.attentions[0, 2, -1].astype(np.float64) * ~g["knockout_removed"][-1]
    np.testing.assert_allclose(e.after.attentions[0, 2, -1], row / row.sum(), rtol=0, atol=1e-6)
    assert e.is_image.sum() == group.tokens.size and len(e.labels) == e.ids.size == len(e.tokens)
    assert e.mask.all()  # PaliGemma without a suffix: the whole prefix sees itself both ways
    for args, message in (((1, 2, 24), "query 24 is out of range"), ((2, 0, 0), "layer 2 is out of range"),
                          ((0, 4, 0), "head 4 is out of range"), ((0, 0, 0, 1), "patch group 1 is out of range")):
        with pytest.raises(CheckpointError, match=message):
            e.overlay(*args)


def test_sweep_ranks_each_head_as_ablating_it_alone(vlms):
    ck, images, g, res = vlms["tiny_smolvlm"]
    sw = vlm_sweep(ck, images, str(g["prompt"]))
    assert sw.complete and sw.grid.shape == (2, 2) and sw.metric == "kl"
    one = vlm_study(ck, images, str(g["prompt"]), Interventions(heads=((1, 0),)), result=res)
    assert sw.grid[1, 0] == pytest.approx(one.kl, rel=1e-9)
    calls = []
    part = vlm_sweep(ck, images, str(g["prompt"]), mode="scale", factor=0.5, metric="logit_diff", tokens=(3, 4),
                     cancelled=lambda: len(calls) >= 3, progress=lambda d, t: calls.append((d, t)))
    assert part.done == 3 and not part.complete and calls[-1] == (3, 4)
    for kw, message in (({"metric": "cosine"}, "choose kl or logit_diff"), ({"mode": "half"}, "ablation mode"),
                        ({"metric": "logit_diff", "tokens": (0, 10 ** 6)}, "token id 1000000 is out of range"),
                        ({"mode": "scale", "factor": float("nan")}, "finite number")):
        with pytest.raises(CheckpointError, match=message):
            vlm_sweep(ck, images, str(g["prompt"]), **kw)


def test_bad_requests_are_one_line(vlms):
    ck, images, g, res = vlms["tiny_llava"]
    prompt = str(g["prompt"])
    T = g["input_ids"].size
    cases = [
        (Interventions(heads=((0, 9),)), {}, "head 9 is out of range: the model has 4 heads"),
        (Interventions(heads=((5, 0),)), {}, "layer 5 is out of range: the model has 2 layers"),
        (Interventions(knockout_layers=(0,)), {"allowed": np.ones((T - 1, T - 1), bool)},
         f"the mask is {T - 1} x {T - 1} tokens, the prompt has {T}"),
        (Interventions(knockout_layers=(0,)), {}, "there is no mask to knock out edges with"),
        (Interventions(patch="head", patch_layer=1), {"clean_text": "USER: <image>\nhi ASSISTANT:"},
         f"the clean prompt has 26 tokens and the corrupted one {T}"),
        (Interventions(patch="head", patch_layer=1), {}, "a patch needs the clean prompt"),
        (Interventions(patch="residual", patch_positions=(T,)), {"clean_text": str(g["clean_prompt"])},
         f"patch position {T} is out of range"),
        (Interventions(heads=((0, 0),), mode="mean"), {"means": np.zeros((2, 4, 3))}, "the head means are"),
    ]
    for spec, kw, message in cases:
        with pytest.raises(CheckpointError, match=message) as info:
            vlm_study(ck, images, prompt, spec, result=res, **kw)
        assert "\n" not in str(info.value)
    with pytest.raises(CheckpointError, match="another picture or prompt"):
        vlm_study(ck, images, "USER: <image>\nwhat is in the box? ASSISTANT:", Interventions(), result=res)
    with pytest.raises(CheckpointError, match="not a vision-language model"):
        vlm_study(load_checkpoint(DATA / "tiny_qwen2"), images, prompt, Interventions())
    with pytest.raises(CheckpointError, match="reads one picture"):
        vlm_study(vlms["tiny_paligemma"][0], [], "caption en", Interventions())


def test_cli_ablate_and_patch_write_the_hooked_logits(vlms, tmp_path, capsys):
    for name in ("tiny_paligemma", "tiny_smolvlm"):
        _ck, _images, g, _res = vlms[name]
        pics = [a for p in g["pictures"] for a in ("--image", str(DATA / name / str(p)))]
        heads = ",".join(f"{a}.{b}" for a, b in g["ablate"])
        out = tmp_path / f"{name}.npz"
        assert main(["model", "ablate", str(DATA / name), *pics, "--text", str(g["prompt"]), "--heads", heads,
                     "--npz", str(out)]) == 0
        with np.load(out) as z:
            np.testing.assert_allclose(z["logits_before"], g["logits_plain"], rtol=0, atol=TOL)
            np.testing.assert_allclose(z["logits_after"], g["logits_zero"], rtol=0, atol=TOL)
            assert z["logits_after"].shape == (vlms[name][0].spec.text.vocab_size,)
            assert z["attentions_after"].shape[2:] == (g["input_ids"].size,) * 2
            assert float(z["kl"]) == pytest.approx(kl_divergence(g["logits_plain"], g["logits_zero"]), abs=1e-4)
        out = tmp_path / f"{name}_patch.npz"
        layer, head = (str(int(x)) for x in g["patch_head"])
        assert main(["model", "patch", str(DATA / name), *pics, "--clean", str(g["clean_prompt"]), "--corrupted",
                     str(g["prompt"]), "--layer", layer, "--head", head, "--npz", str(out)]) == 0
        with np.load(out) as z:
            np.testing.assert_allclose(z["logits_corrupted"], g["logits_plain"], rtol=0, atol=TOL)
            np.testing.assert_allclose(z["logits_patched"], g["logits_patch_head"], rtol=0, atol=TOL)
            np.testing.assert_array_equal(z["clean_ids"], g["clean_input_ids"])
    assert "KL(before || after)" in capsys.readouterr().out


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    pg, llava = DATA / "tiny_paligemma", DATA / "tiny_llava"
    pic = ["--image", str(pg / "image.png")]
    for argv, message in (
        (["ablate", str(pg), *pic, "--text", "caption en", "--heads", "0.7"], "head 7 is out of range"),
        (["ablate", str(pg), *pic, "--heads", "0.1"], "give the prompt with --text"),
        (["ablate", str(pg), "--image", str(tmp_path / "none.png"), "--text", "hi", "--heads", "0.1"],
         "image not found"),
        (["ablate", str(pg), "--text", "caption en", "--heads", "0.1"], "reads one picture with every prompt"),
        (["ablate", str(pg), *pic, "--text", "caption en", "--heads", "0.1", "--target", "x"], "--target and --stack"),
        (["patch", str(llava), "--image", str(llava / "image.png"), "--clean", "USER: <image>\nhi ASSISTANT:",
          "--corrupted", "USER: <image>\nwhat is in the picture? ASSISTANT:", "--layer", "1", "--head", "0"],
         "the clean prompt has 26 tokens and the corrupted one 28"),
        (["patch", str(llava), "--image", str(llava / "image.png"), "--clean", "a", "--corrupted", "b",
          "--layer", "3", "--head", "0"], "layer 3 is out of range"),
        (["patch", str(DATA / "tiny_qwen2"), *pic, "--clean", "a", "--corrupted", "b", "--layer", "0", "--head", "0"],
         "--image is for vision-language models"),
    ):
        assert main(["model", *argv, "--npz", str(tmp_path / "x.npz")]) == 1, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.npz").exists()
