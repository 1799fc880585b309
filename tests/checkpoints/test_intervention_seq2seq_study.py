"""The Intervene tab's computing for encoder-decoders (attnviz.checkpoints.intervention_seq2seq_study) against the
PyTorch forward-hook goldens of tests/checkpoints/test_intervention_seq2seq.py (tools/make_intervention_goldens.py
seq2seq): a session's interventions on a chosen stack give transformers' logits to 1e-5; the knockout of the
encoder's self-attention from a session mask, the head patch from a clean source, the sweep and bad requests."""

from __future__ import annotations

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.intervention_seq2seq import STACKS
from attnviz.checkpoints.intervention_seq2seq_study import seq2seq_study, seq2seq_sweep, token_id
from attnviz.checkpoints.interventions import kl_divergence
from attnviz.model.state import Interventions

S2S = DATA.parent
TOL = 1e-5


@pytest.fixture(scope="module")
def bart():
    return load_checkpoint(S2S / "tiny_bart")


@pytest.fixture(scope="module")
def g():
    return golden(S2S / "tiny_bart" / "golden_interventions.npz")


@pytest.mark.parametrize("stack", STACKS)
def test_the_sessions_interventions_give_the_hooks_logits(bart, g, stack):
    src, dec = g["src_ids"], g["dec_ids"]
    heads = tuple(tuple(int(x) for x in h) for h in g[f"{stack}_ablate"])
    for mode in ("zero", "mean"):
        eff = seq2seq_study(bart, src, dec, Interventions(heads=heads, mode=mode), stack)
        np.testing.assert_allclose(eff.before.logits, g["plain"], atol=TOL, rtol=0)
        np.testing.assert_allclose(eff.after.logits, g[f"{stack}_{mode}"], atol=TOL, rtol=0)
        assert eff.kl == pytest.approx(kl_divergence(g["plain"][-1], g[f"{stack}_{mode}"][-1]), abs=1e-5)
        assert eff.kl > 0 and eff.applied and stack.replace("cross", "cross-attention") in eff.applied[0]
    sh = tuple(int(x) for x in g[f"{stack}_scale_head"])
    eff = seq2seq_study(bart, src, dec, Interventions(heads=(sh,), mode="scale", factor=float(g["scale"])), stack)
    np.testing.assert_allclose(eff.after.logits, g[f"{stack}_scaled"], atol=TOL, rtol=0)
    layer, head = (int(x) for x in g[f"{stack}_patch"])
    spec = Interventions(patch="head", patch_layer=layer, patch_head=head)
    eff = seq2seq_study(bart, g["corrupted_ids"], dec, spec, stack, clean_ids=src)
    np.testing.assert_allclose(eff.before.logits, g["corrupted"], atol=TOL, rtol=0)
    np.testing.assert_allclose(eff.after.logits, g[f"{stack}_patched"], atol=TOL, rtol=0)
    np.testing.assert_allclose(eff.clean.logits, g["plain"], atol=TOL, rtol=0)


def test_effects_hold_the_stacks_maps_and_the_per_layer_change(bart, g):
    src, dec = g["src_ids"], g["dec_ids"]
    eff = seq2seq_study(bart, src, dec, Interventions(heads=((0, 0),), mode="zero"), "cross")
    L, nh = bart.spec.dec_layers, bart.spec.dec_heads
    b, a, d = eff.attention(1, 0)
    assert b.shape == (dec.size, src.size) and np.allclose(d, a - b)
    change = eff.attention_change()
    assert change.shape == (L, nh)
    assert np.all(change[0] == 0) and change[1].max() > 0  # zeroing a head's output moves the later maps only
    # the stream entering each encoder layer and decoder layer 0 is untouched; decoder layer 1 reads the edit
    E = bart.spec.enc_layers
    assert eff.residual_labels == tuple(f"E{i}" for i in range(E)) + tuple(f"D{i}" for i in range(L))
    assert np.all(eff.residual_change[:E + 1] == 0)
    assert eff.residual_change[E + 1] > 0
    top = eff.top("before")
    assert len(top) == 5 and top[0][1] >= top[-1][1]
    np.testing.assert_allclose(sum(p for _t, p in eff.top("after", 301)), 1.0, atol=1e-9)


def test_a_session_mask_knocks_out_the_encoders_edges(bart, g):
    src, dec = g["src_ids"], g["dec_ids"]
    start, key = (int(x) for x in g["encoder_ko"])
    allowed = np.ones((src.size, src.size), bool)
    allowed[start:, key] = False
    spec = Interventions(knockout_layers=tuple(range(bart.spec.enc_layers)))
    eff = seq2seq_study(bart, src, dec, spec, "cross", allowed=allowed)  # the knockout is the encoder's, any stack
    np.testing.assert_allclose(eff.after.logits, g["encoder_knockout"], atol=TOL, rtol=0)
    assert np.all(eff.after.encoder[:, :, start:, key] == 0)
    one_head = seq2seq_study(bart, src, dec, Interventions(knockout_layers=(0,), knockout_heads=(1,)), "encoder",
                             allowed=allowed)
    assert np.all(one_head.after.encoder[0, 1, start:, key] == 0)
    # head 0 keeps every edge: the same map (the masked kernel call may round differently from the unmasked one)
    np.testing.assert_allclose(one_head.after.encoder[0, 0], one_head.before.encoder[0, 0], atol=1e-6, rtol=0)
    assert np.abs(one_head.after.encoder[0, 1] - one_head.before.encoder[0, 1]).max() > 1e-3
    with pytest.raises(CheckpointError, match=f"the source has {src.size} tokens"):
        seq2seq_study(bart, src, dec, spec, "encoder", allowed=np.ones((3, 3), bool))


def test_the_sweep_ranks_the_stacks_heads_and_stops_when_cancelled(bart, g):
    src, dec = g["src_ids"], g["dec_ids"]
    seen = []
    sw = seq2seq_sweep(bart, src, dec, "decoder", progress=lambda i, n: seen.append((i, n)))
    L, nh = bart.spec.dec_layers, bart.spec.dec_heads
    assert sw.grid.shape == (L, nh) and sw.complete and seen[-1] == (L * nh, L * nh)
    one = seq2seq_study(bart, src, dec, Interventions(heads=((1, 1),)), "decoder")
    assert sw.grid[1, 1] == pytest.approx(one.kl, abs=1e-12)
    calls = iter(range(100))
    part = seq2seq_sweep(bart, src, dec, "encoder", cancelled=lambda: next(calls) >= 3)
    assert part.done == 3 and not part.complete
    a, b = int(np.argmax(one.before.logits[-1])), 5
    diff = seq2seq_sweep(bart, src, dec, "cross", metric="logit_diff", tokens=(a, b))
    eff = seq2seq_study(bart, src, dec, Interventions(heads=((0, 1),)), "cross")
    lb, la = eff.logit_difference(a, b)
    assert diff.grid[0, 1] == pytest.approx(lb - la, abs=1e-9)


@pytest.mark.parametrize("call, message", [
    (lambda ck, s, d: seq2seq_study(ck, s, d, Interventions(heads=((0, 9),)), "encoder"), "head 9 is out of range"),
    (lambda ck, s, d: seq2seq_study(ck, s, d, Interventions(), "self"), "not an attention"),
    (lambda ck, s, d: seq2seq_study(ck, s, d, Interventions(patch="head"), "cross", clean_ids=s[:-1]),
     "same length"),
    (lambda ck, s, d: seq2seq_study(ck, s, d, Interventions(patch="head"), "cross"), "needs the clean source"),
    (lambda ck, s, d: seq2seq_study(ck, s, d, Interventions(patch="residual"), "cross", clean_ids=s),
     "residual stream runs on decoder LLMs"),
    (lambda ck, s, d: seq2seq_study(ck, s, d, Interventions(knockout_layers=(0,)), "encoder"), "session's mask"),
    (lambda ck, s, d: seq2seq_sweep(ck, s, d, "cross", metric="cosine"), "measured by kl or logit_diff"),
    (lambda ck, s, d: seq2seq_sweep(ck, s, d, "cross", metric="logit_diff", tokens=(0, 10**6)), "out of range"),
    (lambda ck, s, d: token_id(ck, "#999999"), "out of range"),
])
def test_bad_requests_are_one_line(bart, g, call, message):
    with pytest.raises(CheckpointError, match=message):
        call(bart, g["src_ids"], g["dec_ids"])


def test_a_token_is_named_by_its_id_or_a_one_token_word(bart):
    assert token_id(bart, "#7") == 7
    with pytest.raises(CheckpointError, match="target tokens"):
        token_id(bart, "a very long phrase of words")
