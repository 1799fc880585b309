"""The exported hook scripts of the encoder-decoders (MarianMT, BART, mBART, T5 v1.0 and v1.1 gated, mT5, Whisper):
the scripts the golden maker ran with transformers (tools/make_seq2seq_code_goldens.py: the window's spec on each stack with
knockouts and patches, and explicit edits of all three stacks at once) are, byte for byte, the ones attnviz writes
today from the session's ``Interventions`` or from explicit edits, and the logits of every decoder row they printed
before and after equal attnviz's own passes (float32 scripts against attnviz's float32 pass; T5's, mT5's and
Whisper's float64 scripts against its float64 pass); for T5 and mT5 the TransformerLens script too
(tools/make_seq2seq_lens_goldens.py); bad requests are one line."""

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
from attnviz.checkpoints.intervention_seq2seq import seq2seq_run, whisper_run
from attnviz.checkpoints.intervention_seq2seq_code import FEATURES_FILE, SUBLAYERS, seq2seq_script
from attnviz.checkpoints.intervention_seq2seq_study import build_edits, seq2seq_study
from attnviz.checkpoints.interventions import Edit
from attnviz.model.state import Interventions

S2S = DATA.parent
FOLDERS = {"tiny_bart": S2S / "tiny_bart", "tiny_marian": S2S / "tiny_marian", "tiny_mbart": S2S / "tiny_mbart",
           "tiny_t5": S2S / "tiny_t5", "tiny_t5_gated": S2S / "tiny_t5_gated", "tiny_t5_mt5": S2S / "tiny_t5_mt5",
           "tiny_whisper": DATA / "tiny_whisper"}
REL = {name: str(path.relative_to(DATA.parents[2])) for name, path in FOLDERS.items()}  # as the goldens' scripts name them
CASES = ("enc", "cross", "dec", "mix")
WIDE = ("tiny_t5", "tiny_t5_gated", "tiny_t5_mt5", "tiny_whisper")
# float32 script against attnviz's float32 pass: at most 2.4e-6 measured, but 9.2e-6 on tiny_t5_gated and 1.1e-5 on
# tiny_t5_mt5 (T5 v1.1's gated MLP magnifies float32 rounding): their 1e-5 check is the float64 script's
TOL32 = {"tiny_t5_gated": 2e-5, "tiny_t5_mt5": 2e-5}
TOL64 = 1e-10  # float64 script against attnviz's float64 pass: at most 5e-14 measured
GOLD = Path("/tmp/gold/bin/python")


LENS = {"tiny_t5": S2S / "tiny_t5", "tiny_t5_gated": S2S / "tiny_t5_gated", "tiny_t5_mt5": S2S / "tiny_t5_mt5"}


class _Models(dict):
    """name -> (checkpoint, golden), each loaded when first asked for."""

    def __init__(self, folders, file):
        super().__init__()
        self.folders, self.file = folders, file

    def __missing__(self, name):
        path = self.folders[name]
        self[name] = (load_checkpoint(path), golden(path / self.file))
        return self[name]


@pytest.fixture(scope="module")
def models():
    return _Models(FOLDERS, "golden_seq2seq_code.npz")


@pytest.fixture(scope="module")
def lens_models():
    return _Models(LENS, "golden_seq2seq_lens.npz")


def _source(g, which):
    return g[f"{which}_features"] if "src_features" in g else g[f"{which}_ids"]


def _run(ck, x, dec, edits=None, dtype=np.float32):
    if ck.spec.family == "whisper":
        return whisper_run(ck, x, dec, edits, dtype=dtype)
    return seq2seq_run(ck, x, dec, edits, dtype=dtype)


def _rows(shape, start, key):
    m = np.zeros(shape, bool)
    m[..., start:, key] = True
    return m


def rebuild(ck, g, case, dtype=np.float32):
    """(script keyword arguments, the attnviz edits {stack: Edit}) of a golden's case; a patch's head outputs are
    recorded from attnviz's own pass over the clean source."""
    s = ck.spec
    x, dec = _source(g, case["source"]), g["dec_ids"]
    S = s.n_frames // 2 if s.family == "whisper" else int(np.size(x))
    T = int(dec.size)
    clean = None if case["clean"] is None else _source(g, case["clean"])
    kw = {"clean": clean}
    if case.get("spec") is not None:
        sp = dict(case["spec"])
        sp["heads"] = tuple(tuple(h) for h in sp["heads"])
        spec = Interventions(stack=case["stack"], **{k: tuple(v) if isinstance(v, list) else v for k, v in sp.items()})
        allowed = None
        if spec.knockout_layers:
            allowed = ~_rows((S, S), *case["ko"])
        clean_pass = None
        if spec.patch == "head":
            clean_pass = _run(ck, clean, dec, {case["stack"]: Edit(record={})}, dtype)
        edits, _said = build_edits(ck, spec, case["stack"], S, T, allowed=allowed, clean=clean_pass)
        kw.update(stack=case["stack"], spec=spec, allowed=allowed)
        return kw, edits
    heads = {"encoder": s.enc_heads, "decoder": s.dec_heads, "cross": s.dec_heads}
    hd = {st: (s.head_dim if getattr(s, "t5_like", False) else s.d_model // nh) for st, nh in heads.items()}
    rows = {"encoder": (S, S), "decoder": (T, T), "cross": (T, S)}
    seed = int(g["given_values_seed"])
    edits = {}
    for stack, e in case["edits"].items():
        edit = Edit()
        for h in e.get("set", []):
            edit.ablate[tuple(h)] = np.random.default_rng(seed).normal(0.0, 0.5, hd[stack]).astype(np.float32)
        for a, b, f in e.get("scale", []):
            edit.scale[(a, b)] = f
        for layer, head, start, key in e.get("knockout", []):
            m = _rows(rows[stack], start, key)
            if head >= 0:
                per = np.zeros((heads[stack], *rows[stack]), bool)
                per[head] = m
                m = per
            edit.knockout[layer] = m
        if e.get("patch"):
            rec = Edit(record={})
            _run(ck, clean, dec, {stack: rec}, dtype)
            for layer, head in e["patch"]:
                edit.patch_heads[(layer, head)] = rec.record[layer][head]
        edits[stack] = edit
    kw.update(edits=edits)
    return kw, edits


@pytest.mark.parametrize("name, case_name, wide", [
    pytest.param(name, case, wide, id=f"{name}-{case}-{'float64' if wide else 'float32'}")
    for name in FOLDERS for case in CASES for wide in ((False, True) if name in WIDE else (False,))])
def test_the_script_run_with_transformers_gives_attnvizs_logits(models, name, case_name, wide):
    ck, g = models[name]
    case = json.loads(str(g[f"{case_name}_case"]))
    key = case_name + ("64" if wide else "")
    dtype = np.float64 if wide else np.float32
    kw, edits = rebuild(ck, g, case, dtype)
    x, dec = _source(g, case["source"]), g["dec_ids"]
    code = seq2seq_script(ck, x, dec, folder=REL[name], float64=wide, **kw)
    text = code["pytorch"]
    assert not code["pytorch_problem"]
    assert hashlib.sha256(text.encode()).hexdigest() == str(g[f"{key}_sha256"])
    before = _run(ck, x, dec, dtype=dtype).logits
    after = _run(ck, x, dec, edits, dtype=dtype).logits
    tol = TOL64 if wide else TOL32.get(name, 1e-5)
    np.testing.assert_allclose(before, g[f"{key}_before"], atol=tol, rtol=0)
    np.testing.assert_allclose(after, g[f"{key}_after"], atol=tol, rtol=0)
    assert np.abs(g[f"{key}_after"] - g[f"{key}_before"]).max() > 1e-4  # the edits did move the logits
    if case.get("spec") is not None and name != "tiny_whisper" and not wide:  # what the window's tab computes
        effects = seq2seq_study(ck, x, dec, kw["spec"], case["stack"], allowed=kw["allowed"], clean_ids=kw["clean"])
        np.testing.assert_array_equal(effects.after.logits, after)


@pytest.mark.parametrize("name", list(LENS))
@pytest.mark.parametrize("case_name", CASES)
def test_the_transformer_lens_script_gives_attnvizs_logits(lens_models, name, case_name):
    """T5 and mT5: the TransformerLens script (tools/make_seq2seq_lens_goldens.py ran it with transformer_lens 4)
    is the one attnviz writes, and its logits are attnviz's float32 pass."""
    ck, g = lens_models[name]
    case = json.loads(str(g[f"{case_name}_case"]))
    kw, edits = rebuild(ck, g, case)
    x, dec = _source(g, case["source"]), g["dec_ids"]
    code = seq2seq_script(ck, x, dec, folder=str(LENS[name].relative_to(DATA.parents[2])), **kw)
    assert not code["lens_problem"] and "TransformerBridge" in code["lens"] and "hook_z" in code["lens"]
    assert hashlib.sha256(code["lens"].encode()).hexdigest() == str(g[f"{case_name}_sha256"])
    tol = TOL32.get(name, 1e-5)
    np.testing.assert_allclose(_run(ck, x, dec).logits, g[f"{case_name}_before"], atol=tol, rtol=0)
    np.testing.assert_allclose(_run(ck, x, dec, edits).logits, g[f"{case_name}_after"], atol=tol, rtol=0)
    assert np.abs(g[f"{case_name}_after"] - g[f"{case_name}_before"]).max() > 1e-4


def test_the_transformer_lens_entry_says_why_not(models):
    ck, g = models["tiny_bart"]
    code = seq2seq_script(ck, g["src_ids"], g["dec_ids"], "cross", Interventions(heads=((0, 1),)))
    assert code["pytorch"] and code["lens"] == "" and "refuses encoders and decoders of different" in code["lens_problem"]
    ck, g = models["tiny_whisper"]
    code = seq2seq_script(ck, g["src_features"], g["dec_ids"], "cross", Interventions(heads=((0, 1),)))
    assert code["pytorch"] and code["lens"] == "" and "no adapter for Whisper" in code["lens_problem"]


def test_the_script_names_the_modules_and_whisper_carries_its_features(models):
    ck, g = models["tiny_t5"]
    spec = Interventions(heads=((1, 2),), mode="zero", stack="cross")
    text = seq2seq_script(ck, g["src_ids"], g["dec_ids"], "cross", spec)["pytorch"]
    compile(text, "hooks.py", "exec")
    assert "decoder.block.{i}.layer.1.EncDecAttention" in text and ".o\n" in text
    assert "edits = {'cross': {1: [(2, 'zero', None)]}}" in text and "knock" not in text and "recorded" not in text
    assert "torch.float32" in text and "T5LayerNorm" not in text
    wide = seq2seq_script(ck, g["src_ids"], g["dec_ids"], "cross", spec, float64=True)["pytorch"]
    assert "torch.float64" in wide and "T5LayerNorm" in wide
    ck, g = models["tiny_whisper"]
    x = g["src_features"]
    spec = Interventions(heads=((0, 1),), mode="mean", stack="encoder", patch="head", patch_layer=1, patch_head=0)
    code = seq2seq_script(ck, x, g["dec_ids"], "encoder", spec, clean=g["corrupted_features"])
    assert SUBLAYERS["bart"]["encoder"] in code["pytorch"] and "WhisperForConditionalGeneration" in code["pytorch"]
    assert code["features_file"] == FEATURES_FILE and repr(FEATURES_FILE) in code["pytorch"]
    np.testing.assert_array_equal(code["features"], x)
    np.testing.assert_array_equal(code["clean_features"], g["corrupted_features"])
    assert repr(code["clean_features_file"]) in code["pytorch"]
    assert code["lens"] == "" and "TransformerLens" in code["lens_problem"]


@pytest.mark.parametrize("call, message", [
    (lambda ck, g: seq2seq_script(ck, g["src_ids"], g["dec_ids"], "self", Interventions(heads=((0, 0),))),
     "'self' is not an attention of the model"),
    (lambda ck, g: seq2seq_script(ck, g["src_ids"], g["dec_ids"], "encoder", Interventions(heads=((0, 9),))),
     "head 9 is out of range"),
    (lambda ck, g: seq2seq_script(ck, g["src_ids"], g["dec_ids"], "cross", Interventions(heads=((5, 0),))),
     "layer 5 is out of range"),
    (lambda ck, g: seq2seq_script(ck, g["src_ids"], g["dec_ids"], edits={"decoder": Edit(ablate={(0, 3): "zero"})}),
     "head 3 is out of range"),
    (lambda ck, g: seq2seq_script(ck, g["src_ids"], g["dec_ids"], edits={"cross": Edit(knockout={0: np.zeros((3, 3), bool)})}),
     r"must be bool \(7, 11\)"),
    (lambda ck, g: seq2seq_script(ck, g["src_ids"], g["dec_ids"], "encoder",
                                  Interventions(patch="head", patch_layer=0, patch_head=0)), "needs the clean source"),
    (lambda ck, g: seq2seq_script(ck, g["src_ids"], g["dec_ids"], "encoder",
                                  Interventions(patch="head", patch_layer=0, patch_head=0), clean=g["src_ids"][:5]),
     "same length"),
    (lambda ck, g: seq2seq_script(ck, g["src_ids"], g["dec_ids"], "encoder", Interventions(knockout_layers=(0,)),
                                  allowed=np.ones((4, 4), bool)), "design a 11 × 11 mask"),
    (lambda ck, g: seq2seq_script(ck, g["src_ids"], g["dec_ids"], "encoder"), "one of the two"),
])
def test_bad_requests_are_one_line(models, call, message):
    ck, g = models["tiny_bart"]
    with pytest.raises(CheckpointError, match=message) as err:
        call(ck, g)
    assert "\n" not in str(err.value)


def test_other_models_and_bad_features_are_one_line(models):
    ck, g = models["tiny_whisper"]
    with pytest.raises(CheckpointError, match=r"\(n_mels, frames\)") as err:
        seq2seq_script(ck, g["src_features"][:10], g["dec_ids"], "encoder", Interventions(heads=((0, 0),)))
    assert "\n" not in str(err.value)
    gpt2 = load_checkpoint(DATA / "tiny_gpt2")
    with pytest.raises(CheckpointError, match="written for MarianMT"):
        seq2seq_script(gpt2, [1, 2], [1], "encoder", Interventions(heads=((0, 0),)))


@pytest.mark.slow
@pytest.mark.skipif(not GOLD.is_file(), reason="no torch and transformers environment at /tmp/gold")
def test_the_whisper_export_runs_as_saved(models, tmp_path):
    """The script and its features file as a person saves them (numpy.save under the names the dict gives), run
    with transformers in a folder of their own, the model named by its absolute path."""
    ck, g = models["tiny_whisper"]
    spec = Interventions(heads=((0, 1), (1, 0)), mode="scale", factor=-1.0, stack="decoder")
    code = seq2seq_script(ck, g["src_features"], g["dec_ids"], "decoder", spec, folder=str(FOLDERS["tiny_whisper"]))
    (tmp_path / "hooks.py").write_text(code["pytorch"])
    np.save(tmp_path / code["features_file"], code["features"])
    out = subprocess.run([str(GOLD), "hooks.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1"))
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    after = whisper_run(ck, g["src_features"], g["dec_ids"], {"decoder": Edit(scale={(0, 1): -1.0, (1, 0): -1.0})})
    np.testing.assert_allclose(after.logits, found["after"], atol=1e-5, rtol=0)
    assert np.abs(np.array(found["after"]) - found["before"]).max() > 1e-4
