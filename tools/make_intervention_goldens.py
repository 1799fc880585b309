"""Write the intervention goldens of tests/checkpoints/test_ckpt_interventions.py.

Run once, in an environment with torch (CPU) and transformers; attnviz itself never imports them:

    /path/to/venv/bin/python tools/make_intervention_goldens.py [tiny_gpt2 ...]
    /path/to/venv/bin/python tools/make_intervention_goldens.py seq2seq

(the second: the encoder-decoders' goldens, :func:`seq2seq_goldens`).

For tiny_llama_lm, tiny_qwen2, tiny_gemma2, tiny_gpt2 (GPT2LMHeadModel) and NEW_FAMILIES (tests/data/checkpoints)
it writes
``golden_interventions.npz`` with the last position's logits of transformers' eager model under PyTorch forward
pre-hooks on each layer's attention output projection (``o_proj``, or the family's own name for it; a head's
output is its slice of that input): ``plain``; ``zero`` and ``mean`` (heads
ABLATE zeroed, or set to their mean over the positions); ``scaled`` (head SCALE_HEAD times SCALE);
``patched`` (head PATCH's output on ``corrupted_ids`` taken from the pass on ``clean_ids``; heads moved into range
for a model of fewer heads); ``corrupted``;
and, where the 4-D mask is the model's only mask (no sliding window), ``knockout``: query rows from
KO_FROM on may not see key KO_KEY in any layer, passed as a 4-D additive attention mask (not for NEW_FAMILIES).
For tiny_llama_lm, tiny_gpt2, tiny_gpt_neox, tiny_opt and tiny_bloom it also runs the exported hook script as
written and keeps its digest and logits (with the knockout, as a 4-D mask, on tiny_llama_lm and tiny_gpt2; on
tiny_gpt2 also the script setting the ABLATE heads to given ``means``: ``means_sha256``, ``means_logits``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "checkpoints"
CLEAN = [1, 5, 9, 3, 7, 11, 4, 8]
CORRUPTED = [1, 5, 9, 3, 12, 11, 4, 8]
ABLATE = [(0, 1), (1, 3)]
SCALE_HEAD, SCALE = (1, 0), 0.5
PATCH = (1, 2)
KO_FROM, KO_KEY = 3, 1
ROOT = Path(__file__).resolve().parents[1]
SNIPPET_MODEL = "tests/data/checkpoints/tiny_llama_lm"  # as the exported script names it (run from ROOT)
# decoder families whose output projection has another name (and a parallel block, ALiBi, learned positions)
KNOCKOUT_SCRIPTS = (SNIPPET_MODEL, "tests/data/checkpoints/tiny_gpt2")
NEW_FAMILIES = ("tiny_gpt_neox", "tiny_phi", "tiny_phi3", "tiny_olmo", "tiny_olmo2", "tiny_stablelm", "tiny_falcon",
                "tiny_opt", "tiny_bloom")


def _code():
    """attnviz/checkpoints/intervention_code.py, loaded by path (it needs only the standard library)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("intervention_code", ROOT / "attnviz/checkpoints/intervention_code.py")
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    return code


def heads_for(n_head: int) -> list[tuple[int, int]]:
    """ABLATE, with its last head moved into range for a model of fewer heads (tiny_gpt_neox has 3)."""
    return [(layer, min(head, n_head - 1)) for layer, head in ABLATE]


def exported_scripts(model: str = SNIPPET_MODEL, ablate=ABLATE) -> dict:
    """Run attnviz's exported PyTorch hook script as written on ``model`` (a folder relative to ROOT), and keep
    its text's digest and its logits."""
    import hashlib

    code = _code()
    T = len(CLEAN)
    ko = np.zeros((T, T), bool)
    ko[KO_FROM:, KO_KEY] = True
    with_ko = model in KNOCKOUT_SCRIPTS  # the 4-D mask knockout is exported where transformers takes the mask as given
    script = code.pytorch_script(model, CLEAN, ablate={h: "zero" for h in ablate}, scale={SCALE_HEAD: SCALE},
                                 knockout={0: ko, 1: ko} if with_ko else None, n_layer=2)
    found = {"script_sha256": hashlib.sha256(script.encode()).hexdigest(), "script_logits": _run(script)}
    if model in KNOCKOUT_SCRIPTS[1:]:  # GPT-2: the heads set to given means (as a corpus sweep file holds them)
        means = given_means(2, 2, 8)
        script = code.pytorch_script(model, CLEAN, ablate={h: means[h] for h in ablate}, n_layer=2)
        found.update(means=means, means_sha256=hashlib.sha256(script.encode()).hexdigest(), means_logits=_run(script))
    return found


def given_means(L: int, nh: int, hd: int) -> np.ndarray:
    """(L, nh, hd) fixed values standing in for a corpus's means of each head's output."""
    return np.random.default_rng(30).normal(0.0, 0.5, (L, nh, hd))


def _run(script: str) -> np.ndarray:
    """The last position's logits an exported script prints, run as written from ROOT."""
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True,
                         env=dict(os.environ, TRANSFORMERS_VERBOSITY="error"))
    return np.array(json.loads(out.stdout.strip().splitlines()[-1]))


def head_hook(model, layer: int, fn):
    hd = model.config.head_dim if getattr(model.config, "head_dim", None) else \
        model.config.hidden_size // model.config.num_attention_heads
    proj = None
    for path in _code().OUT_PROJ_PATHS:  # the same lookup as the exported script
        try:
            proj = model.get_submodule(path.format(i=layer))
            break
        except AttributeError:
            pass

    def pre(module, args):
        x = args[0].clone()
        b, t, _ = x.shape
        heads = x.view(b, t, -1, hd)
        fn(heads)
        return (heads.view(b, t, -1),) + tuple(args[1:])

    return proj.register_forward_pre_hook(pre)


def last_logits(model, ids, hooks=(), mask=None) -> np.ndarray:
    handles = [head_hook(model, layer, fn) for layer, fn in hooks]
    try:
        with torch.no_grad():
            kw = {} if mask is None else {"attention_mask": mask}
            out = model(torch.tensor([ids]), **kw).logits[0, -1]
    finally:
        for h in handles:
            h.remove()
    return out.double().numpy()


def main(names=()) -> None:
    """Write the goldens of ``names`` (folder names under tests/data/checkpoints; none: every model)."""
    for name in names or ("tiny_llama_lm", "tiny_qwen2", "tiny_gemma2", "tiny_gpt2") + NEW_FAMILIES:
        folder = DATA / name
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
        heads = heads_for(model.config.num_attention_heads)
        patch = (PATCH[0], min(PATCH[1], model.config.num_attention_heads - 1))
        out = {"clean_ids": np.array(CLEAN), "corrupted_ids": np.array(CORRUPTED), "ablate": np.array(heads),
               "scale_head": np.array(SCALE_HEAD), "scale": SCALE, "patch": np.array(patch),
               "ko_from": KO_FROM, "ko_key": KO_KEY}
        out["plain"] = last_logits(model, CLEAN)
        out["corrupted"] = last_logits(model, CORRUPTED)

        def zero(h):
            return lambda x: x[:, :, h].zero_()

        def mean(h):
            return lambda x: x[:, :, h].copy_(x[:, :, h].mean(dim=1, keepdim=True).expand_as(x[:, :, h]))

        out["zero"] = last_logits(model, CLEAN, [(layer, zero(h)) for layer, h in heads])
        out["mean"] = last_logits(model, CLEAN, [(layer, mean(h)) for layer, h in heads])
        out["scaled"] = last_logits(model, CLEAN, [(SCALE_HEAD[0], lambda x: x[:, :, SCALE_HEAD[1]].mul_(SCALE))])
        saved = {}

        def keep(x):
            saved["v"] = x[:, :, patch[1]].clone()

        last_logits(model, CLEAN, [(patch[0], keep)])
        out["patched"] = last_logits(model, CORRUPTED, [(patch[0], lambda x: x[:, :, patch[1]].copy_(saved["v"]))])
        if name in NEW_FAMILIES:
            pass  # the knockout as a 4-D mask is checked on the three families above
        elif not getattr(model.config, "sliding_window", None) or name == "tiny_llama_lm":
            T = len(CLEAN)
            allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))
            allowed[KO_FROM:, KO_KEY] = False
            mask = torch.zeros(1, 1, T, T)
            mask[0, 0][~allowed] = torch.finfo(torch.float32).min
            out["knockout"] = last_logits(model, CLEAN, mask=mask)
        if name in ("tiny_llama_lm", "tiny_gpt2", "tiny_gpt_neox", "tiny_opt", "tiny_bloom"):
            out.update(exported_scripts(f"tests/data/checkpoints/{name}", heads))
        np.savez_compressed(folder / "golden_interventions.npz", **out)
        print(name, sorted(out))


# ---- encoder-decoders -----------------------------------------------------------------------------------

SEQ2SEQ_DATA = DATA.parent  # tests/data: tiny_marian, tiny_bart, tiny_mbart (pre-LN blocks)
# folder -> (source ids, corrupted source ids (one token changed), decoder input ids: the start token, then the
# target's first tokens)
SEQ2SEQ = {"tiny_marian": ([4, 44, 17, 14, 51, 19, 6, 10, 14, 12, 0], [4, 44, 21, 14, 51, 19, 6, 10, 14, 12, 0],
                           [88, 4, 53, 56, 83, 73, 10]),
           "tiny_bart": ([0, 263, 79, 79, 82, 293, 82, 85, 79, 71, 2], [0, 263, 90, 79, 82, 293, 82, 85, 79, 71, 2],
                         [2, 0, 69, 264, 77, 286, 85]),
           "tiny_mbart": ([4, 98, 76, 90, 27, 11, 17, 23, 19, 2, 106], [4, 98, 50, 90, 27, 11, 17, 23, 19, 2, 106],
                          [122, 40, 9, 83, 35, 17, 16])}
SUBLAYERS = {"encoder": "model.encoder.layers.{i}.self_attn", "decoder": "model.decoder.layers.{i}.self_attn",
             "cross": "model.decoder.layers.{i}.encoder_attn"}
S2S_KO = {"encoder": (3, 1), "cross": (2, 4)}  # stack -> (rows from, key): the edges removed in every layer


T5_DATA = {"tiny_t5": 0, "tiny_t5_gated": 0, "tiny_t5_mt5": 0}  # folder -> the case of its cases.json
T5_SUBLAYERS = {"encoder": "encoder.block.{i}.layer.0.SelfAttention", "decoder": "decoder.block.{i}.layer.0.SelfAttention",
                "cross": "decoder.block.{i}.layer.1.EncDecAttention"}
WHISPER = ("tiny_whisper", "tiny_whisper_en")  # in tests/data/checkpoints; the corrupted input: the frames reversed


def _shape(cfg) -> tuple[dict, dict]:
    """(layers, heads) per stack of a BART-like, T5 or Whisper config."""
    if cfg.model_type in ("t5", "mt5"):
        dec = cfg.num_decoder_layers if cfg.num_decoder_layers is not None else cfg.num_layers
        return ({"encoder": cfg.num_layers, "decoder": dec, "cross": dec},
                {"encoder": cfg.num_heads, "decoder": cfg.num_heads, "cross": cfg.num_heads})
    return ({"encoder": cfg.encoder_layers, "decoder": cfg.decoder_layers, "cross": cfg.decoder_layers},
            {"encoder": cfg.encoder_attention_heads, "decoder": cfg.decoder_attention_heads,
             "cross": cfg.decoder_attention_heads})


def _seq2seq_inputs():
    """folder -> (model class, inputs dict of numpy arrays: src, corrupted, dec)."""
    out = {}
    for name, (src, bad, dec) in SEQ2SEQ.items():
        out[SEQ2SEQ_DATA / name] = (np.array(src), np.array(bad), np.array(dec))
    for name, case in T5_DATA.items():
        c = json.loads((SEQ2SEQ_DATA / name / "cases.json").read_text())[case]
        src = np.array(c["input_ids"])
        bad = src.copy()
        bad[2] = (bad[2] + 7) % 100 + 2  # one source token changed
        out[SEQ2SEQ_DATA / name] = (src, bad, np.array(c["decoder_input_ids"]))
    for name in WHISPER:
        g = np.load(DATA / name / "golden.npz")
        feats = g["input_features"].astype(np.float32)
        out[DATA / name] = (feats, np.ascontiguousarray(feats[:, ::-1]), g["decoder_input_ids"])
    return out


def seq2seq_goldens() -> None:
    """For SEQ2SEQ, T5_DATA and WHISPER: ``golden_interventions.npz`` with every decoder row's logits (T, V) of
    transformers' eager model under pre-hooks on the stack's output projection (``out_proj``; T5: ``o``):
    ``plain``; per stack ``{stack}_zero`` and ``{stack}_mean`` (heads ABLATE moved into range), ``{stack}_scaled``
    (SCALE_HEAD times SCALE), ``{stack}_patched`` (head PATCH on the corrupted source taken from the clean one) and
    ``corrupted``; ``{stack}_knockout`` for the encoder's self-attention and the cross-attention (rows from S2S_KO's
    first number may not see its key), added to the scores inside the modeling module's eager attention for those
    modules only. Whisper's source is its log-mel features (``src_features``; corrupted: the frames reversed). T5 and
    Whisper run in float64 (``float64`` True): float32's own rounding on their logits reaches 1e-5 (T5's RMSNorm, which
    transformers takes in float32 whatever the dtype, is kept in float64 too)."""
    import importlib

    from transformers import AutoModelForSeq2SeqLM, WhisperForConditionalGeneration

    for folder, (src, bad, dec) in _seq2seq_inputs().items():
        whisper = folder.name in WHISPER
        cls = WhisperForConditionalGeneration if whisper else AutoModelForSeq2SeqLM
        model = cls.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
        cfg = model.config
        t5 = cfg.model_type in ("t5", "mt5")
        wide = t5 or whisper  # float64: float32's own rounding reaches 1e-5 on these logits
        if wide:
            model = model.double()
        if t5:  # T5LayerNorm takes the variance in float32 whatever the model's dtype: keep float64 through
            for m in model.modules():
                if type(m).__name__ in ("T5LayerNorm", "MT5LayerNorm"):
                    m.forward = lambda x, m=m: m.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)
                                                                          + m.variance_epsilon))
        sublayers, proj = (T5_SUBLAYERS, ".o") if t5 else (SUBLAYERS, ".out_proj")
        layers, heads_of = _shape(cfg)
        modeling = importlib.import_module(type(model).__module__)

        def logits(x, hooks=(), knock=None):
            handles = []
            for stack, layer, fn in hooks:
                mod = model.get_submodule(sublayers[stack].format(i=layer) + proj)
                nh = heads_of[stack]

                def pre(module, args, fn=fn, nh=nh):
                    y = args[0].clone()
                    b, t, c = y.shape
                    h = y.view(b, t, nh, c // nh)
                    fn(h)
                    return (h.view(b, t, c),) + tuple(args[1:])

                handles.append(mod.register_forward_pre_hook(pre))
            orig = modeling.eager_attention_forward
            if knock is not None:
                stack, (start, key) = knock
                targets = {id(model.get_submodule(sublayers[stack].format(i=i))) for i in range(layers[stack])}

                def knocked(module, query, k, value, attention_mask, *args, **kw):
                    if id(module) in targets:
                        add = torch.zeros(1, 1, query.shape[2], k.shape[2], dtype=query.dtype)
                        add[0, 0, start:, key] = torch.finfo(query.dtype).min
                        attention_mask = add if attention_mask is None else attention_mask + add
                    return orig(module, query, k, value, attention_mask, *args, **kw)

                modeling.eager_attention_forward = knocked
            try:
                with torch.no_grad():
                    inputs = ({"input_features": torch.tensor(x[None], dtype=model.dtype)} if whisper else
                              {"input_ids": torch.tensor([x])})
                    out = model(**inputs, decoder_input_ids=torch.tensor([dec])).logits[0]
            finally:
                modeling.eager_attention_forward = orig
                for h in handles:
                    h.remove()
            return out.double().numpy()

        out = {"dec_ids": np.array(dec), "plain": logits(src), "corrupted": logits(bad)}
        if whisper:
            out["src_features"], out["corrupted_features"] = src, bad
        else:
            out["src_ids"], out["corrupted_ids"] = np.array(src), np.array(bad)
        assert np.abs(out["corrupted"] - out["plain"]).max() > 1e-4, f"{folder.name}: the corruption changed nothing"
        for stack in ("encoder", "decoder", "cross"):
            nh, L = heads_of[stack], layers[stack]
            heads = [(min(layer, L - 1), min(h, nh - 1)) for layer, h in ABLATE]
            sh = (min(SCALE_HEAD[0], L - 1), min(SCALE_HEAD[1], nh - 1))
            ph = (min(PATCH[0], L - 1), min(PATCH[1], nh - 1))
            out[f"{stack}_ablate"], out[f"{stack}_scale_head"], out[f"{stack}_patch"] = (np.array(heads), np.array(sh),
                                                                                      np.array(ph))
            out[f"{stack}_zero"] = logits(src, [(stack, layer, lambda x, h=h: x[:, :, h].zero_()) for layer, h in heads])
            out[f"{stack}_mean"] = logits(src, [(stack, layer, lambda x, h=h: x[:, :, h].copy_(
                x[:, :, h].mean(dim=1, keepdim=True).expand_as(x[:, :, h]))) for layer, h in heads])
            out[f"{stack}_scaled"] = logits(src, [(stack, sh[0], lambda x: x[:, :, sh[1]].mul_(SCALE))])
            saved = {}
            logits(src, [(stack, ph[0], lambda x: saved.update(v=x[:, :, ph[1]].clone()))])
            out[f"{stack}_patched"] = logits(bad, [(stack, ph[0], lambda x: x[:, :, ph[1]].copy_(saved["v"]))])
            if stack in S2S_KO:
                out[f"{stack}_ko"] = np.array(S2S_KO[stack])
                out[f"{stack}_knockout"] = logits(src, knock=(stack, S2S_KO[stack]))
                assert np.abs(out[f"{stack}_knockout"] - out["plain"]).max() > 1e-4, f"{folder.name} {stack}: no change"
        out["scale"], out["float64"] = SCALE, wide
        np.savez_compressed(folder / "golden_interventions.npz", **out)
        print(folder.name, sorted(out))


if __name__ == "__main__":
    import sys

    seq2seq_goldens() if sys.argv[1:] == ["seq2seq"] else main(tuple(sys.argv[1:]))
