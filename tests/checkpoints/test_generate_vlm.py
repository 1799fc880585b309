"""Generation with the vision-language models over a key/value cache against transformers' ``generate``
on their tiny checkpoints: greedy ids equal, the next-token distribution of every step and every attention
row of the final sequence within 1e-5 of transformers' (eager, over the whole sequence with the same
pixels). Goldens: tools/make_vlm_generate_goldens.py."""

from __future__ import annotations

import numpy as np
import pytest
from ckpt_helpers import DATA, golden
from PIL import Image

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.generate import Sampling, generate_vlm, vlm_prefix
from attnviz.cli import main

FOLDERS = ["tiny_paligemma", "tiny_paligemma2", "tiny_llava", "tiny_llava_full", "tiny_idefics3", "tiny_smolvlm"]


def pictures(name: str) -> list[np.ndarray]:
    files = ["image.png", "image2.png"] if name == "tiny_smolvlm" else ["image.png"]
    return [np.asarray(Image.open(DATA / name / f).convert("RGB")) for f in files]


def prompt(name: str) -> str:
    return str(golden(DATA / name / "golden.npz")["prompt"])


@pytest.fixture(scope="module")
def models():
    return {name: load_checkpoint(DATA / name) for name in FOLDERS}


@pytest.mark.parametrize("name", FOLDERS)
def test_greedy_ids_steps_and_cached_attention_match_transformers(models, name):
    g = golden(DATA / name / "golden_generate.npz")
    ck = models[name]
    n_new = len(g["greedy_ids"]) - len(g["prompt_ids"])
    res = generate_vlm(ck, pictures(name), prompt(name), max_new_tokens=n_new)
    np.testing.assert_array_equal(res.ids[:res.n_prompt], g["prompt_ids"])  # the processor's expansion
    np.testing.assert_array_equal(res.ids, g["greedy_ids"])
    assert res.stopped == "length" and res.attentions.shape == g["attentions"].shape
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)
    want = np.take_along_axis(g["probs"], res.top_ids, axis=1)  # transformers' probabilities of our top tokens
    np.testing.assert_allclose(res.top_probs, want, atol=1e-5, rtol=0)
    np.testing.assert_array_equal(res.top_ids[:, 0], np.argmax(g["probs"], axis=1))


def test_the_prefix_runs_once_then_one_token_per_step(models):
    name = "tiny_paligemma"
    ck = models[name]
    seen = []
    res = generate_vlm(ck, pictures(name), prompt(name), max_new_tokens=4, on_progress=seen.append)
    n0 = res.n_prompt
    assert [(p.start, p.ids.size) for p in seen] == [(0, n0)] + [(n0 + i, 1) for i in range(4)]
    assert seen[0].top_ids is None and all(p.top_ids[0] == p.ids[0] for p in seen[1:])
    # the prefix's rows are the family's single pass (prefix-LM: the image sees the prompt after it)
    single = ck.run(pictures(name), prompt(name))
    np.testing.assert_allclose(seen[0].rows, single.attentions, atol=1e-6)
    assert seen[0].rows[0, 0, 0, n0 - 1] > 0  # the first image token sees the last prompt token


def test_seeded_sampling_repeats_and_stays_within_the_top_k(models):
    name = "tiny_llava"
    ck = models[name]
    how = Sampling(sample=True, temperature=1.4, top_k=3, seed=11)
    a = generate_vlm(ck, pictures(name), prompt(name), max_new_tokens=8, how=how)
    b = generate_vlm(ck, pictures(name), prompt(name), max_new_tokens=8, how=how)
    np.testing.assert_array_equal(a.ids, b.ids)
    assert all(t in row[:3] for t, row in zip(a.generated, a.top_ids))
    assert np.all(a.top_probs[:, 3:] == 0) and np.allclose(a.top_probs[:, :3].sum(1), 1.0)


def test_end_of_sequence_stops(models):
    name = "tiny_idefics3"
    ck = models[name]
    first = generate_vlm(ck, pictures(name), prompt(name), max_new_tokens=4)
    res = generate_vlm(ck, pictures(name), prompt(name), max_new_tokens=4, eos_ids=[int(first.generated[1])])
    assert res.stopped == "eos" and list(res.generated) == list(first.generated[:2])


@pytest.mark.parametrize("name, images, text, message", [
    ("tiny_paligemma", 0, "caption en", "one picture"),
    ("tiny_llava", 1, "what is in the picture?", "placeholder"),
    ("tiny_llava", 1, "", "empty"),
    ("tiny_idefics3", 1, "no placeholder here", "image"),
    ("tiny_llava", 2, "USER: <image>\nhi ASSISTANT:", "takes 1 image"),
])
def test_bad_requests_are_one_clear_message(models, name, images, text, message):
    ck = models[name]
    imgs = (pictures(name) * 2)[:images]
    with pytest.raises(CheckpointError, match=message):
        generate_vlm(ck, imgs, text, max_new_tokens=2)


def test_too_many_new_tokens_and_a_text_model_are_refused(models):
    ck = models["tiny_llava"]
    with pytest.raises(CheckpointError, match="positions"):
        generate_vlm(ck, pictures("tiny_llava"), prompt("tiny_llava"), max_new_tokens=10_000)
    with pytest.raises(CheckpointError, match="not a vision-language model"):
        generate_vlm(load_checkpoint(DATA / "tiny_llama"), [], "hi", max_new_tokens=2)


def test_an_untied_model_without_its_head_cannot_generate(models, monkeypatch):
    import attnviz.checkpoints.generate as gen

    monkeypatch.setattr(gen, "VLM_HEADS", ("nowhere.lm_head.weight",))
    with pytest.raises(CheckpointError, match="no language-model head"):
        generate_vlm(models["tiny_llava"], pictures("tiny_llava"), prompt("tiny_llava"), max_new_tokens=2)


def test_command_line_image_generation(tmp_path, capsys, models):
    name = "tiny_smolvlm"
    out = tmp_path / "v.npz"
    args = ["model", "generate", str(DATA / name), "--text", prompt(name), "--max-new-tokens", "5", "--npz", str(out)]
    for f in ("image.png", "image2.png"):
        args[-2:-2] = ["--image", str(DATA / name / f)]
    assert main(args) == 0
    ck = models[name]
    want = generate_vlm(ck, pictures(name), prompt(name), max_new_tokens=5, eos_ids=[300])
    pre = vlm_prefix(ck, pictures(name), prompt(name))
    with np.load(out) as z:
        np.testing.assert_array_equal(z["ids"], want.ids)
        np.testing.assert_array_equal(z["generated"], want.generated)
        np.testing.assert_allclose(z["attentions"], want.attentions, atol=0)
        assert z["is_image"][:len(pre.ids)].tolist() == pre.is_image.tolist() and not z["is_image"][len(pre.ids):].any()
        assert len(z["tokens"]) == len(z["ids"])
    assert "image tokens" in capsys.readouterr().out


def test_command_line_refuses_an_image_for_a_text_model(tmp_path, capsys):
    code = main(["model", "generate", str(DATA / "tiny_llama_lm"), "--image", str(DATA / "tiny_llava" / "image.png"),
                 "--text", "hi", "--npz", str(tmp_path / "x.npz")])
    err = capsys.readouterr().err
    assert code != 0 and "vision-language model" in err and "Traceback" not in err
    assert not (tmp_path / "x.npz").exists()


@pytest.mark.parametrize("name", FOLDERS)
def test_sampled_steps_draw_from_transformers_warped_distribution(models, name):
    """Along the greedy path, each step's logits (from the cached step's last hidden state) through
    temperature, top-k and top-p: within 1e-5 of transformers' warpers on its own logits."""
    from attnviz.checkpoints.decoder import rms_norm, rms_norm_plus_one
    from attnviz.checkpoints.generate import logits, vlm_text_weights, warp

    g = golden(DATA / name / "golden_generate.npz")
    ck = models[name]
    c = ck.spec.text
    seen = []
    n_new = len(g["greedy_ids"]) - len(g["prompt_ids"])
    generate_vlm(ck, pictures(name), prompt(name), max_new_tokens=n_new, on_progress=seen.append)
    how = Sampling(sample=True, temperature=float(g["temperature"]), top_k=int(g["top_k"]), top_p=float(g["top_p"]))
    W = vlm_text_weights(ck)
    norm = rms_norm_plus_one if c.decoder.norm_plus_one else rms_norm
    for step, chunk in enumerate(seen[:-1]):
        h = norm(chunk.stream[-1][-1:], np.asarray(W["norm.weight"], dtype=np.float32), c.ln_eps)
        got = warp(logits(c, W, h)[0], how)
        np.testing.assert_allclose(got, g["warped"][step], atol=1e-5, rtol=0)
        assert set(np.flatnonzero(got > 0)) == set(np.flatnonzero(g["warped"][step] > 0))
