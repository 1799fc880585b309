"""Write the tiny Whisper checkpoints of tests/checkpoints/test_whisper_model.py, their goldens, and the
bundled demo clip resources/audio/chirps.wav.

Run once, in a throw-away environment with torch (CPU), transformers 5, tokenizers and soundfile; attnviz
never imports them:

    /tmp/gold/bin/python tools/make_whisper_model_goldens.py [--models-only]

(``--models-only``: the folders without golden.npz, to try a change of the models quickly.)

Each folder under tests/data/checkpoints/ holds what ``WhisperForConditionalGeneration.save_pretrained``
writes (config.json, model.safetensors, generation_config.json), the feature extractor's
preprocessor_config.json (a 2-second window, so the encoder has 100 frames instead of 1,500), a tokenizer
(tokenizer.json and tokenizer_config.json: byte-level BPE trained here on a few sentences, then Whisper's
special tokens in Whisper's order) and

* ``clip.wav``: 1.5 s of 16 kHz 16-bit PCM (tones, a chirp and seeded noise);
* ``golden.npz``: ``input_features`` (WhisperFeatureExtractor on the clip as soundfile reads it),
  ``decoder_input_ids`` (the decoder prompt then the tokens of ``target``), transformers' eager
  ``encoder_attentions`` (L_enc, nh, 100, 100), ``decoder_attentions``, ``cross_attentions``
  (L_dec, nh, T_dec, 100) from ``output_attentions=True``, ``encoder_hidden``, ``decoder_hidden``,
  ``logits``; ``prompt``: the decoder prompt ``generate`` starts from (its ``_retrieve_init_tokens``);
  ``sequences``: what greedy ``generate(input_features, do_sample=False)`` returns under the folder's
  generation_config.json (the new tokens, without the prompt), and ``sequences_3`` with ``max_new_tokens=3``; ``top2_gap``: the smallest gap
  between the best and second-best logit over the greedy steps (how far a float32 rounding is from flipping
  a token); for the multilingual model also ``prompt_de`` / ``sequences_de`` (``language="de"``) and
  ``prompt_fr_translate`` / ``sequences_fr_translate`` (``language="fr", task="translate"``); beam search,
  timestamps and their mixes as :func:`more_goldens` says. Every ``sequences*`` is what ``generate`` returns:
  each window's written tokens, the end of text taken off.

The folders:

* ``tiny_whisper``    — multilingual: lang_to_id (en, fr, de), task_to_id, no language in the config, so
                        ``generate`` detects it (the decoder on the start token, the best language token);
                        suppress_tokens and begin_suppress_tokens; 101 timestamp tokens after
                        <|notimestamps|> (<|0.00|> ... <|2.00|>), max_initial_timestamp_index 5;
* ``tiny_whisper_en`` — English-only: forced_decoder_ids [[1, <|notimestamps|>]], no lang_to_id, GELU
                        replaced by ReLU, 3 decoder layers.

Weights are drawn wider than the library's initialiser (std 0.25, norm gains around 1) so that the maps are
far from uniform and a wrong layer shows.
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import soundfile as sf
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "checkpoints"
DEMO = ROOT / "resources" / "audio" / "chirps.wav"
CORPUS = ["the cat sat on the mat", "attention shows which frames the model listens to",
          "a short tone then a rising chirp", "speech becomes tokens on a time axis", "hello world, this is audio",
          "whisper writes what it hears", "one two three four five"]
LANGS = ("en", "fr", "de")
TARGET = " a rising chirp, then the tone"
CHUNK_SECONDS = 2  # the tiny models' window: 200 feature frames, 100 encoder frames
STAMPS = CHUNK_SECONDS * 50 + 1  # timestamp tokens <|0.00|> ... <|2.00|> (0.02 s apart) of the multilingual model
MAX_INITIAL = 5  # its max_initial_timestamp_index: the transcript opens no later than <|0.10|>
STAMP_STD = 0.08  # the timestamp tokens' rows of the token table
BASE_VOCAB = 311  # the tokens before the timestamps: the weights of these rows are drawn as before they existed


def specials(multilingual: bool) -> list[str]:
    """Whisper's special tokens in its order (the multilingual model's timestamp tokens last)."""
    langs = [f"<|{c}|>" for c in LANGS] if multilingual else []
    stamps = [f"<|{i * 0.02:.2f}|>" for i in range(STAMPS)] if multilingual else []
    return (["<|endoftext|>", "<|startoftranscript|>"] + langs
            + ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>",
               "<|notimestamps|>"] + stamps)


def make_tokenizer(multilingual: bool) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer)
    tok.add_special_tokens(specials(multilingual))
    return tok


def clip(seconds: float = 1.5, seed: int = 0) -> np.ndarray:
    """float32 samples at 16 kHz: a 330 Hz tone, a chirp rising from 300 to 2,300 Hz, then a 660 Hz tone."""
    t = np.arange(int(seconds * 16_000)) / 16_000
    third = t.size // 3
    x = np.zeros_like(t)
    x[:third] = 0.4 * np.sin(2 * np.pi * 330 * t[:third])
    tc = t[third:2 * third] - t[third]
    x[third:2 * third] = 0.4 * np.sin(2 * np.pi * (300 * tc + 2000 * tc ** 2 / (2 * tc[-1])))
    x[2 * third:] = 0.3 * np.sin(2 * np.pi * 660 * t[2 * third:])
    return (x + 0.02 * np.random.default_rng(seed).standard_normal(t.size)).astype(np.float32)


def demo_clip() -> np.ndarray:
    """3 s of 'spoken-like' sound at 16 kHz: five syllable-like bursts, each a gliding pitch with harmonics
    under a smooth envelope, with short pauses (resources/audio/chirps.wav)."""
    rate, out = 16_000, []
    rng = np.random.default_rng(7)
    for f0, glide, dur in ((140, 40, 0.32), (180, -50, 0.28), (120, 60, 0.40), (200, -80, 0.30), (150, 30, 0.45)):
        t = np.arange(int(dur * rate)) / rate
        f = f0 + glide * t / dur
        phase = 2 * np.pi * np.cumsum(f) / rate
        tone = sum(np.sin(k * phase) / k for k in range(1, 8))
        env = np.sin(np.pi * t / dur) ** 2
        out += [0.25 * env * tone, np.zeros(int(0.15 * rate))]
    x = np.concatenate(out)
    return (x + 0.003 * rng.standard_normal(x.size)).astype(np.float32)


def widen(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("embed_positions.weight") and "encoder" in name:
                continue  # the stored sinusoids, as Whisper keeps them
            elif name.endswith("embed_tokens.weight") and p.shape[0] > BASE_VOCAB:
                # the rows of the tokens before the timestamps as they were drawn before there were any
                p[:BASE_VOCAB].copy_(0.25 * torch.randn((BASE_VOCAB, p.shape[1]), generator=g))
                extra = torch.Generator().manual_seed(seed + 100)
                # smaller rows: without timestamps asked the text tokens win, as in a trained Whisper
                p[BASE_VOCAB:].copy_(STAMP_STD * torch.randn((p.shape[0] - BASE_VOCAB, p.shape[1]), generator=extra))
            else:
                p.copy_(0.25 * torch.randn(p.shape, generator=g))


def build(name: str, *, multilingual: bool, act: str, dec_layers: int, seed: int) -> None:
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    tok = make_tokenizer(multilingual)
    vocab = tok.get_vocab()
    ids = {t: vocab[t] for t in specials(multilingual)}
    cfg = WhisperConfig(
        vocab_size=tok.get_vocab_size(), num_mel_bins=80, d_model=24, encoder_layers=2, encoder_attention_heads=4,
        decoder_layers=dec_layers, decoder_attention_heads=2, encoder_ffn_dim=48, decoder_ffn_dim=40,
        activation_function=act, max_source_positions=CHUNK_SECONDS * 50, max_target_positions=48,
        decoder_start_token_id=ids["<|startoftranscript|>"], pad_token_id=ids["<|endoftext|>"],
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|endoftext|>"], attn_implementation="eager")
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(cfg).eval()
    widen(model, seed)
    gen = model.generation_config
    gen.decoder_start_token_id = ids["<|startoftranscript|>"]
    gen.eos_token_id = ids["<|endoftext|>"]
    gen.pad_token_id = ids["<|endoftext|>"]
    gen.no_timestamps_token_id = ids["<|notimestamps|>"]
    gen.max_length = 24
    gen.suppress_tokens = [vocab["!"], vocab["?"], ids["<|startoflm|>"], ids["<|nospeech|>"]]
    gen.begin_suppress_tokens = [vocab["Ġ"], ids["<|endoftext|>"]]
    if multilingual:
        gen.is_multilingual = True
        gen.lang_to_id = {f"<|{c}|>": ids[f"<|{c}|>"] for c in LANGS}
        gen.task_to_id = {"translate": ids["<|translate|>"], "transcribe": ids["<|transcribe|>"]}
        gen.max_initial_timestamp_index = MAX_INITIAL
    else:
        gen.is_multilingual = False
        gen.forced_decoder_ids = [[1, ids["<|notimestamps|>"]]]
    model.save_pretrained(folder)
    fe = WhisperFeatureExtractor(chunk_length=CHUNK_SECONDS)
    fe.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "WhisperTokenizer", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "add_prefix_space": False}, indent=2) + "\n")

    sf.write(folder / "clip.wav", clip(seed=seed), 16_000, subtype="PCM_16")
    if "--models-only" in sys.argv:
        return
    samples, _ = sf.read(folder / "clip.wav", dtype="float32")
    feats = fe(samples, sampling_rate=16_000, return_tensors="pt").input_features  # (1, 80, 200)
    with torch.no_grad():
        seq = model.generate(feats, do_sample=False)
        seq3 = model.generate(feats, do_sample=False, max_new_tokens=3)
        named = {}
        if multilingual:  # a named language (and task) instead of detection
            for key, kw in (("de", {"language": "de"}), ("fr_translate", {"language": "fr", "task": "translate"})):
                gc = copy.deepcopy(model.generation_config)
                gc.return_timestamps = False
                for k, v in kw.items():
                    setattr(gc, k, v)
                named[f"prompt_{key}"] = model._retrieve_init_tokens(feats, 1, gc, model.config, feats.shape[-1],
                                                                     {})[0].numpy()
                named[f"sequences_{key}"] = model.generate(feats, do_sample=False, **kw)[0].numpy()
        named |= more_goldens(model, feats, multilingual)
        # the decoder prompt generate() puts first (and leaves out of what it returns), by its own code
        gc = copy.deepcopy(model.generation_config)
        gc.return_timestamps = False  # as generate() sets it before asking
        prompt = model._retrieve_init_tokens(feats, 1, gc, model.config, feats.shape[-1], {})[0]
        target = tok.encode(TARGET, add_special_tokens=False).ids
        dec = torch.cat([prompt, torch.tensor(target)])[None]
        out = model(input_features=feats, decoder_input_ids=dec, output_attentions=True)
        enc_hidden = model.model.encoder(feats).last_hidden_state
        dec_hidden = model.model(input_features=feats, decoder_input_ids=dec).last_hidden_state
        # the smallest margin between the best and second-best logit at the greedy steps
        gaps, full = [], torch.cat([prompt[None], seq], dim=1)
        for t in range(len(prompt), full.shape[1]):
            lg = model(input_features=feats, decoder_input_ids=full[:, :t]).logits[0, -1]
            top = torch.topk(lg, 2).values
            gaps.append(float(top[0] - top[1]))
    np.savez_compressed(
        folder / "golden.npz", input_features=feats[0].numpy(), target=np.array(TARGET),
        decoder_input_ids=dec[0].numpy(), prompt=prompt.numpy(),
        encoder_attentions=np.stack([a[0].numpy() for a in out.encoder_attentions]),
        decoder_attentions=np.stack([a[0].numpy() for a in out.decoder_attentions]),
        cross_attentions=np.stack([a[0].numpy() for a in out.cross_attentions]),
        encoder_hidden=enc_hidden[0].numpy(), decoder_hidden=dec_hidden[0].numpy(), logits=out.logits[0].numpy(),
        sequences=seq[0].numpy(), sequences_3=seq3[0].numpy(), top2_gap=np.float64(min(gaps) if gaps else np.inf),
        **named)
    print(name, "prompt", prompt.tolist(), "greedy", seq[0].tolist(), "min gap", min(gaps) if gaps else None)


def _maps(model, feats, dec) -> dict:
    out = model(input_features=feats, decoder_input_ids=torch.as_tensor(dec)[None], output_attentions=True)
    return {"decoder_attentions": np.stack([a[0].numpy() for a in out.decoder_attentions]),
            "cross_attentions": np.stack([a[0].numpy() for a in out.cross_attentions])}


def more_goldens(model, feats, multilingual: bool) -> dict:
    """Beam search (``sequences_beam2``, ``sequences_beam3``, with its maps over the prompt then the chosen
    beam's tokens: ``beam3_decoder_attentions``, ``beam3_cross_attentions``), and for the multilingual model
    timestamps (``prompt_ts``, ``sequences_ts`` and the segments' ``ts_start``, ``ts_end``, ``ts_length``;
    ``sequences_ts_beam2``; ``sequences_ts_de``: German, timestamps, 3 new tokens a window) and
    ``sequences_fr_beam2``."""
    out = {}
    runs = {"beam2": {"num_beams": 2}, "beam3": {"num_beams": 3},
            # another end of text, so that beams finish: at the second token (166) or later (255)
            "eos166": {"eos_token_id": 166}, "beam3_eos166": {"num_beams": 3, "eos_token_id": 166},
            "beam3_eos255": {"num_beams": 3, "eos_token_id": 255},
            "beam3_eos166_early": {"num_beams": 3, "eos_token_id": 166, "early_stopping": True},
            "beam3_eos166_never": {"num_beams": 3, "eos_token_id": 166, "early_stopping": "never",
                                   "length_penalty": 2.0}}
    if multilingual:
        runs |= {"ts": {"return_timestamps": True}, "ts_beam2": {"return_timestamps": True, "num_beams": 2},
                 "ts_de": {"return_timestamps": True, "language": "de", "max_new_tokens": 3},
                 "fr_beam2": {"language": "fr", "num_beams": 2}}
    for key, kw in runs.items():
        res = model.generate(feats, do_sample=False, return_segments=True, **kw)
        out[f"sequences_{key}"] = res["sequences"][0].numpy()
        if key == "ts":
            segs = res["segments"][0]
            out["ts_start"] = np.array([float(sg["start"]) for sg in segs])
            out["ts_end"] = np.array([float(sg["end"]) for sg in segs])
            out["ts_length"] = np.array([len(sg["tokens"]) for sg in segs])
            gc = copy.deepcopy(model.generation_config)
            gc.return_timestamps = True
            out["prompt_ts"] = model._retrieve_init_tokens(feats, 1, gc, model.config, feats.shape[-1], {})[0].numpy()
        print(model.config.decoder_layers, key, out[f"sequences_{key}"].tolist())
    gc = copy.deepcopy(model.generation_config)
    gc.return_timestamps = False
    prompt = model._retrieve_init_tokens(feats, 1, gc, model.config, feats.shape[-1], {})[0].numpy()
    maps = _maps(model, feats, np.concatenate([prompt, out["sequences_beam3"]]))
    out |= {f"beam3_{k}": v for k, v in maps.items()}
    return out


def main() -> None:
    build("tiny_whisper", multilingual=True, act="gelu", dec_layers=2, seed=0)
    build("tiny_whisper_en", multilingual=False, act="relu", dec_layers=3, seed=1)
    DEMO.parent.mkdir(parents=True, exist_ok=True)
    sf.write(DEMO, demo_clip(), 16_000, subtype="PCM_16")
    print(DEMO, DEMO.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
