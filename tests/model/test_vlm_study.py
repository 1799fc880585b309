"""What the Pretrained panel draws for a vision-language(-action) model, without Qt: the example prompt and
options from the family, a query's attention over the patches (one head, the mean over heads, its row of
the rollout), the per-layer shares of attention the text or action tokens give to the image, the text and
the first token, and the segments handed to the mask designer."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.checkpoints import CheckpointError, attention_rollout, head_summaries
from attnviz.checkpoints.study import (DEFAULT_TASK, CheckpointStudy, VlmOutcome, action_span, default_options,
                                       default_prompt, default_query,
                                       head_title, map_levels, mask_segments, parse_options, patch_maps,
                                       prompt_from_field, prompt_to_field, query_rows, query_values, row_rollout,
                                       run_vlm_outcome, share_curves, token_patch, vlm_summaries)
from vlm_samples import LLAVA_PROMPT, fake_checkpoint, llava_run, paligemma_run, picture, policy_run, smolvlm_run


def test_the_example_prompt_comes_from_the_familys_hint():
    assert default_prompt(fake_checkpoint("llava")) == LLAVA_PROMPT
    assert default_prompt(fake_checkpoint("idefics3")) == "What is in the picture?"  # no example in the hint
    several = fake_checkpoint("paligemma")
    object.__setattr__(several, "prompt_hint", "a task prefix, e.g. 'caption en', 'answer en what is it?' or "
                                                "'detect cube'; '\\n' after it")
    assert default_prompt(several) == "caption en"  # the first example of several
    policy = fake_checkpoint("pi0")
    object.__setattr__(policy, "prompt_hint", "the task instruction; the robot state (4 numbers)")
    assert default_prompt(policy) == DEFAULT_TASK
    field = prompt_to_field(LLAVA_PROMPT)
    assert field == "USER: <image>\\nWhat is in the picture? ASSISTANT:" and "\n" not in field
    assert prompt_from_field(field) == LLAVA_PROMPT


def test_options_start_from_the_familys_defaults():
    policy = fake_checkpoint("pi0")
    assert default_options(policy) == {"state": "", "noise_seed": "0", "time": "1.0"}
    object.__setattr__(policy, "spec", type("Spec", (), {"state_dim": 3})())
    assert default_options(policy)["state"] == "0,0,0"
    flagged = fake_checkpoint("idefics3")
    object.__setattr__(flagged, "options", ("vision_attentions",))  # a computation flag: no field for it
    assert default_options(flagged) == {}


def test_options_are_parsed_or_refused_by_name():
    names = ("suffix", "state", "noise_seed", "time")
    assert parse_options(names, {"suffix": " a cup ", "state": "0.5, -1,2", "noise_seed": "3", "time": "0.25"}) == {
        "suffix": " a cup ", "state": [0.5, -1.0, 2.0], "noise_seed": 3, "time": 0.25}
    assert parse_options(names, {"state": "", "time": "  "}) == {}  # empty fields: the family's defaults
    for raw, what in (({"state": "a,b"}, "state must be comma-separated"), ({"state": "1,nan"}, "finite"),
                      ({"noise_seed": "-2"}, "noise seed must be a whole number"),
                      ({"time": "2"}, r"time t must be in \[0, 1\]"), ({"time": "soon"}, "time t must be a number")):
        with pytest.raises(ValueError, match=what):
            parse_options(names, raw)


@pytest.mark.parametrize("make", [llava_run, paligemma_run, smolvlm_run, policy_run])
def test_row_rollout_is_a_row_of_attention_rollout(make):
    run = make()
    out = VlmOutcome(run)
    want = attention_rollout(run.attentions).matrix  # (T, T)
    for q in (0, run.T // 2, run.T - 1):
        np.testing.assert_allclose(row_rollout(out.fused, q), want[q], rtol=1e-5, atol=1e-7)


def test_a_query_row_over_the_patches():
    run = llava_run()
    out = VlmOutcome(run)
    q = default_query(run)
    assert q == run.T - 1 and run.tokens[q] == ":"  # the token that predicts the answer
    np.testing.assert_array_equal(query_values(out, q, "head", 1, 2), run.attentions[1, 2, q].astype(np.float64))
    np.testing.assert_allclose(query_values(out, q, "mean", 0), run.attentions[0, :, q].mean(axis=0), rtol=1e-6)
    values = query_values(out, q, "head", 1, 2)
    (grid,) = patch_maps(run, values)
    g = run.patches[0]
    np.testing.assert_array_equal(grid, values[g.tokens].reshape(g.grid))
    assert map_levels([grid]) == (0.0, float(grid.max()))
    assert map_levels([np.zeros((2, 2))]) == (0.0, 1.0)
    assert token_patch(run, int(g.tokens[5])) == (0, 5) and token_patch(run, q) is None
    # an image token as the query: causal, so it sees only the patches before it
    first = int(g.tokens[0])
    (own,) = patch_maps(run, query_values(out, first, "head", 0, 0))
    assert own[0, 0] == pytest.approx(run.attentions[0, 0, first, first]) and own.ravel()[1:].sum() == 0
    with pytest.raises(ValueError, match="unknown view"):
        query_values(out, q, "max")
    with pytest.raises(ValueError, match="out of range"):
        query_values(out, run.T, "head")


def test_tiles_and_global_image_each_get_their_map():
    run = smolvlm_run()
    out = VlmOutcome(run)
    maps = patch_maps(run, query_values(out, default_query(run), "mean", 1))
    assert [m.shape for m in maps] == [(2, 2)] * 5
    assert [g.name for g in run.patches][-1] == "global image"


def test_a_policys_action_tokens_read_the_action_expert():
    run = policy_run()
    out = VlmOutcome(run)
    a0, a1 = action_span(run)
    assert (a0, a1) == (run.segment("actions").start, run.T) and default_query(run) == a0
    rows, seen = query_rows(run, a0 + 1)
    np.testing.assert_array_equal(rows, run.action_attentions[:, :, 1, :])
    np.testing.assert_array_equal(seen, run.action_mask[1])
    np.testing.assert_array_equal(query_values(out, a0 + 1, "head", 1, 3), run.action_attentions[1, 3, 1])
    with pytest.raises(ValueError, match="action expert"):
        query_values(out, a0, "rollout")
    rows, _seen = query_rows(run, 3)  # an image token: the language model's own row
    np.testing.assert_array_equal(rows, run.attentions[:, :, 3, :])


def test_share_of_attention_per_layer():
    run = llava_run()
    sh = share_curves(run)
    image = run.image_tokens()
    text_after = np.arange(int(image[-1]) + 1, run.T)  # before the picture no token may see it
    np.testing.assert_array_equal(sh.queries, text_after)
    labels = [label for label, _v in sh.lines]
    assert labels == ["image", "first token", "text"]
    lines = dict(sh.lines)
    np.testing.assert_allclose(lines["image"], run.share_to(run.attentions, text_after, image))
    np.testing.assert_allclose(lines["first token"], run.share_to(run.attentions, text_after, [0]))
    assert all(v.shape == (run.attentions.shape[0],) for v in lines.values())
    np.testing.assert_allclose(sum(lines.values()), 1.0, rtol=1e-5)  # the groups cover every key once
    pg = dict(share_curves(paligemma_run()).lines)
    assert set(pg) == {"image", "prefix", "suffix"}  # token 0 is an image token: no line of its own
    pol = share_curves(policy_run())
    assert pol.what.startswith("action tokens") and [k for k, _v in pol.lines] == ["image", "language", "state",
                                                                                     "actions"]
    np.testing.assert_allclose(sum(v for _k, v in pol.lines), 1.0, rtol=1e-5)


def test_summaries_add_the_first_token_and_distance():
    run = paligemma_run()
    s = vlm_summaries(run.attentions, run.special)
    want = head_summaries(run.attentions, special=run.special)
    for field in ("entropy", "to_special", "to_self", "to_previous"):
        np.testing.assert_allclose(getattr(s, field), getattr(want, field), rtol=1e-6)
    a = run.attentions.astype(np.float64)
    np.testing.assert_allclose(s.to_first, a[..., 0].mean(axis=-1))
    i = np.arange(run.T)
    np.testing.assert_allclose(s.distance, (a * np.abs(i[:, None] - i[None, :])).sum(axis=-1).mean(axis=-1))


def test_segments_for_the_mask_designer():
    assert mask_segments(paligemma_run()) == [("image", 0, 16, "image", "I"), ("prefix", 16, 20, "text", "P"),
                                              ("suffix", 20, 23, "text", "A")]
    pol = policy_run()
    assert [(n, k, r) for n, _a, _b, k, r in mask_segments(pol)] == [
        ("images", "image", "I"), ("language", "text", "P"), ("state", "block", "P"), ("actions", "block", "E")]
    assert [k for _n, _a, _b, k, _r in mask_segments(llava_run())] == ["text", "image", "text"]


def test_the_run_job_reads_images_and_options():
    calls = []
    ckpt = fake_checkpoint("paligemma", calls=calls)
    img = picture()
    out = run_vlm_outcome(ckpt, [("demo: x.png", lambda: img)], "caption en\\nplease", {"suffix": "a red cup"})
    assert calls[0][1] == "caption en\nplease" and calls[0][2] == {"suffix": "a red cup"}
    assert calls[0][0][0] is img and out.image_name == "demo: x.png"
    assert out.result.tokens[-3:] == ["red", "cup", "<eos>"]
    llava = fake_checkpoint("llava")
    with pytest.raises(CheckpointError, match="no <image> placeholder"):
        run_vlm_outcome(llava, [("x", lambda: img)], "What is it?", {})
    with pytest.raises(CheckpointError, match="takes 1 image per prompt; 2 were given"):
        run_vlm_outcome(llava, [("x", lambda: img), ("y", lambda: img)], LLAVA_PROMPT, {})


def test_the_study_offers_the_prompt_and_the_models_mask():
    study = CheckpointStudy()
    study.loaded(fake_checkpoint("llava"))
    assert study.kind == "vlm" and study.offered_prompt() == prompt_to_field(LLAVA_PROMPT)
    keys = [k for k, _label in study.refresh_images(type("S", (), {"sources": ()})())]
    assert study.vlm_job(["nope"], LLAVA_PROMPT, {}) is None
    out = study.vlm_job(keys[:1], prompt_to_field(LLAVA_PROMPT), {})()
    assert study.show(out) and study.vlm and not study.shows_image()
    m, mask = study.head_map(1, 0)
    np.testing.assert_array_equal(mask, out.result.mask)
    np.testing.assert_array_equal(m, out.result.attentions[1, 0])
    out.result.kv_group = 2
    assert head_title(out.result, 1, 3) == "layer 1 · head 3 · kv head 1 (shared by 2 heads)"
