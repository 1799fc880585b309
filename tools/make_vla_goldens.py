"""Make the tiny SmolVLA policy and its golden for ``tests/checkpoints/test_ckpt_vla.py``.

Runs only in a throw-away venv outside the repository, never in attnviz's own (attnviz never imports torch):

    python3 -m venv /tmp/lerobot
    /tmp/lerobot/bin/pip install torch==2.14.1 torchvision==0.29.1      # the builds on this machine's disk
    /tmp/lerobot/bin/pip install --no-deps lerobot==0.4.4               # it pins torch<2.11, torchvision<0.26
    /tmp/lerobot/bin/pip install "transformers>=4.57.1,<5" "numpy<2.3" safetensors "draccus==0.10.0" einops \
        "huggingface-hub>=0.34.2,<0.36" num2words "accelerate>=1.10,<2" "deepdiff>=7,<9" termcolor "packaging<26" \
        pillow jsonlines "datasets>=4,<5" "gymnasium>=1.1.1,<2" "setuptools<81" "imageio[ffmpeg]<3" \
        "opencv-python-headless<4.13" "av>=15,<16" "diffusers>=0.27.2,<0.36" "pyserial>=3.5,<4" \
        "pynput>=1.7.7,<1.9" "wandb>=0.24,<0.25" "rerun-sdk>=0.24,<0.27"
    cd /work/main && /tmp/lerobot/bin/python tools/make_vla_goldens.py

(lerobot 0.4.4 is the newest release for Python 3.11; 0.5 and later need Python 3.12. Its torch pin would
download a CUDA build of several GB, so torch comes first and lerobot without its dependencies, then the
ones its policy code imports.)

It writes ``tests/data/checkpoints/tiny_smolvla`` (and ``tiny_smolvla_markers``, a second layout on the same
SmolVLM, see :func:`main`): the policy as lerobot saves it (``config.json``,
``model.safetensors`` in bf16 and the preprocessor with the state's mean / std), the tiny SmolVLM it names
in ``vlm_model_name`` (a folder ``vlm`` beside them: SmolVLM's config.json, tokenizer and processor files,
no weights, as ``load_vlm_weights: false`` reads it), two camera PNGs and ``golden.npz``: the prefix ids,
the 2-D masks the policy builds, every layer's attention weights of the VLM prefix pass and of the action
expert at one flow time and noise, the vision tower's maps, the pixels it saw and the expert's velocity.
The weights are drawn with a fixed seed, so every run writes the same files.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import torch
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "checkpoints" / "tiny_smolvla"

CORPUS = ("pick up the red cube and put it in the box. push the green block to the left. open the drawer, "
          "then close it. stack the blue cup on the yellow plate. move the arm up and grasp the handle. "
          "place the sponge next to the bowl. turn the knob to the right. fold the towel in half.")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<end_of_utterance>", "<fake_token_around_image>",
           "<image>", "<global-img>", "<video>"]
INSTRUCTION = "pick up the red cube"
STATE = [0.25, -0.5, 1.0, 0.125]
STATE_MEAN = [0.1, -0.2, 0.5, 0.0]
STATE_STD = [0.5, 0.25, 2.0, 1.0]
CAMERAS = {"observation.images.top": (30, 20), "observation.images.wrist": (32, 32)}  # key -> (H, W)
NOISE_SEED, TIME = 3, 0.7  # the maps' noise (numpy's default_rng(seed).standard_normal) and flow time
VELOCITY_CASES = ((0, 1.0), (3, 0.7), (5, 0.0), (7, 0.35))  # (noise seed, t) whose velocity is recorded


def noise(seed: int, shape) -> np.ndarray:
    """attnviz's noise convention: numpy's PCG64 standard normal, float32."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def make_tokenizer(folder: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import GPT2TokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, min_frequency=1, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([CORPUS] * 4, trainer=trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    fast = GPT2TokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<end_of_utterance>",
                             unk_token="<|endoftext|>", pad_token="<|im_end|>", add_prefix_space=False,
                             extra_special_tokens={"fake_image_token": "<fake_token_around_image>",
                                                   "image_token": "<image>", "global_image_token": "<global-img>",
                                                   "end_of_utterance_token": "<end_of_utterance>"})
    fast.save_pretrained(folder)
    return fast


def make_vlm(folder: Path) -> None:
    """The tiny SmolVLM the policy names: its config, tokenizer and processor (no weights are read)."""
    from transformers import SmolVLMConfig, SmolVLMImageProcessor, SmolVLMProcessor, SmolVLMVideoProcessor

    folder.mkdir(parents=True)
    tok = make_tokenizer(folder)
    cfg = SmolVLMConfig(
        text_config={"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 5,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "vocab_size": len(tok),
                     "rms_norm_eps": 1e-5, "rope_theta": 100000.0, "max_position_embeddings": 256,
                     "hidden_act": "silu", "tie_word_embeddings": False, "pad_token_id": tok.pad_token_id},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                       "image_size": 24, "patch_size": 4, "num_channels": 3, "layer_norm_eps": 1e-6,
                       "hidden_act": "gelu_pytorch_tanh"},
        scale_factor=2, image_token_id=tok.convert_tokens_to_ids("<image>"), vocab_size=len(tok),
        pad_token_id=tok.pad_token_id)
    cfg.save_pretrained(folder)
    image = SmolVLMImageProcessor(size={"longest_edge": 24}, max_image_size={"longest_edge": 24},
                                  do_image_splitting=False)
    video = SmolVLMVideoProcessor(size={"longest_edge": 24}, max_image_size={"longest_edge": 24})
    SmolVLMProcessor(image_processor=image, tokenizer=tok, video_processor=video, image_seq_len=9).save_pretrained(folder)


def build_policy(cameras: dict, state_dim: int, **overrides):
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    feats = {k: PolicyFeature(type=FeatureType.VISUAL, shape=(3, h, w)) for k, (h, w) in cameras.items()}
    feats["observation.state"] = PolicyFeature(type=FeatureType.STATE, shape=(state_dim,))
    kw = dict(vlm_model_name="vlm", load_vlm_weights=False, device="cpu", chunk_size=5, n_action_steps=5,
              max_state_dim=6, max_action_dim=6, resize_imgs_with_padding=(24, 24), tokenizer_max_length=16,
              num_vlm_layers=4, num_expert_layers=-1, self_attn_every_n_layers=2, expert_width_multiplier=0.75,
              input_features=feats, output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(3,))},
              push_to_hub=False)
    kw.update(overrides)
    cfg = SmolVLAConfig(**kw)
    torch.manual_seed(0)
    policy = SmolVLAPolicy(cfg)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # weights large enough that the maps are far from uniform; bf16-exact
        for name, p in policy.named_parameters():
            if p.ndim == 1 and "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif p.ndim == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[1] * (int(np.prod(p.shape[2:])) if p.ndim > 2 else 1)
                p.copy_(torch.randn(p.shape, generator=g) * (1.5 / fan_in**0.5))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return policy


class Recorder:
    """Replaces the policy's eager attention: the same arithmetic, keeping the mask and the softmax weights."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def __call__(self, attention_mask, batch_size, head_dim, query_states, key_states, value_states):
        m = self.model
        nh, nkv = m.num_attention_heads, m.num_key_value_heads
        g = nh // nkv
        k = key_states[:, :, :, None, :].expand(*key_states.shape[:3], g, head_dim).reshape(
            batch_size, key_states.shape[1], nh, head_dim)
        v = value_states[:, :, :, None, :].expand(*value_states.shape[:3], g, head_dim).reshape(
            batch_size, value_states.shape[1], nh, head_dim)
        q = query_states.to(torch.float32).transpose(1, 2)
        k = k.to(torch.float32).transpose(1, 2)
        w = torch.matmul(q, k.transpose(2, 3)) * head_dim**-0.5
        w = torch.where(attention_mask[:, None, :, :], w, torch.finfo(w.dtype).min)
        probs = torch.nn.functional.softmax(w, dim=-1).to(v.dtype)
        self.calls.append((attention_mask[0].numpy().copy(), probs[0].numpy().copy()))
        out = torch.matmul(probs, v.permute(0, 2, 1, 3)).permute(0, 2, 1, 3)
        return out.reshape(batch_size, -1, nh * head_dim)


def make(out: Path, cameras: dict, state: list, instruction: str, *, vlm: str = "vlm", long_text: str | None = None,
         **overrides) -> None:
    """One tiny policy folder and its golden.npz (``vlm`` names the SmolVLM folder, relative to ``out``)."""
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy, make_att_2d_masks
    from lerobot.policies.smolvla.processor_smolvla import make_smolvla_pre_post_processors

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    os.chdir(out)  # vlm_model_name is read from here, as from a policy folder
    if vlm == "vlm":
        make_vlm(out / "vlm")
    policy = build_policy(cameras, len(state), vlm_model_name=vlm, **overrides)
    n = len(state)
    stats = {"observation.state": {"mean": torch.tensor(STATE_MEAN[:n]), "std": torch.tensor(STATE_STD[:n])},
             "action": {"mean": torch.zeros(3), "std": torch.ones(3)}}
    pre, _post = make_smolvla_pre_post_processors(policy.config, dataset_stats=stats)
    policy.to(torch.bfloat16).save_pretrained(out)
    pre.save_pretrained(out)

    policy = SmolVLAPolicy.from_pretrained(out)  # what lerobot reads back (bf16 weights into a float32 model)
    policy.eval()
    vlm_model = policy.model.vlm_with_expert
    vlm_model.vlm.config.vision_config._attn_implementation = "eager"
    rec = Recorder(vlm_model)
    vlm_model.eager_attention_forward = rec

    rng = np.random.default_rng(11)
    obs = {}
    for i, (key, (h, w)) in enumerate(cameras.items()):
        yy, xx = np.mgrid[0:h, 0:w]
        img = np.stack([(xx * 255 // max(w - 1, 1)), (yy * 255 // max(h - 1, 1)),
                        rng.integers(0, 256, (h, w))], axis=-1).astype(np.uint8)  # (h, w, 3)
        Image.fromarray(img).save(out / f"camera{i}.png")
        obs[key] = torch.from_numpy(img).permute(2, 0, 1).float() / 255.0  # (3, h, w) as a dataset gives it
    obs["observation.state"] = torch.tensor(state)
    m = policy.model
    chunk, adim = policy.config.chunk_size, policy.config.max_action_dim

    def prefix_of(task: str):
        batch = pre({**obs, "task": task})
        images, img_masks = policy.prepare_images(batch)
        lang, lang_mask = batch["observation.language.tokens"], batch["observation.language.attention_mask"]
        embs, pad, att = m.embed_prefix(images, img_masks, lang, lang_mask, state=policy.prepare_state(batch))
        return batch, images, lang, lang_mask, embs, pad, att

    with torch.no_grad():
        batch, images, lang, lang_mask, prefix, prefix_pad, prefix_att = prefix_of(instruction)
        vis = []
        for img in images:
            o = vlm_model.get_vlm_model().vision_model(pixel_values=img, output_attentions=True)
            vis.append(np.stack([a[0].numpy() for a in o.attentions]))  # (L_v, nh_v, P, P)
        mask2d = make_att_2d_masks(prefix_pad, prefix_att)
        pos = torch.cumsum(prefix_pad, dim=1) - 1
        rec.calls = []
        _, kv = vlm_model.forward(attention_mask=mask2d, position_ids=pos, past_key_values=None,
                                  inputs_embeds=[prefix, None], use_cache=True, fill_kv_cache=True)
        prefix_calls = rec.calls
        velocities = []
        for seed, t in VELOCITY_CASES:
            x = torch.from_numpy(noise(seed, (chunk, adim)))[None]
            rec.calls = []
            v = m.denoise_step(prefix_pad, kv, x, torch.tensor([t], dtype=torch.float32))
            velocities.append(v[0].numpy())
            if (seed, t) == (NOISE_SEED, TIME):
                expert_calls = rec.calls
                x_maps = x[0].numpy()
        extra = {}
        if long_text is not None:  # an instruction longer than tokenizer_max_length: its ids and one velocity
            _, _, l_ids, l_mask, l_prefix, l_pad, l_att = prefix_of(long_text)
            _, l_kv = vlm_model.forward(attention_mask=make_att_2d_masks(l_pad, l_att),
                                        position_ids=torch.cumsum(l_pad, dim=1) - 1, past_key_values=None,
                                        inputs_embeds=[l_prefix, None], use_cache=True, fill_kv_cache=True)
            x = torch.from_numpy(noise(NOISE_SEED, (chunk, adim)))[None]
            lv = m.denoise_step(l_pad, l_kv, x, torch.tensor([TIME], dtype=torch.float32))
            extra = {"long_instruction": np.array(long_text), "long_lang_ids": l_ids[0].numpy().astype(np.int64),
                     "long_velocity": lv[0].numpy()}
    Tp = prefix.shape[1]
    Ta = chunk
    expert_maps = np.zeros((len(expert_calls), expert_calls[0][1].shape[0], Ta, Tp + Ta), np.float32)
    expert_masks = np.zeros((len(expert_calls), Ta, Tp + Ta), bool)
    for i, (mk, pr) in enumerate(expert_calls):
        expert_maps[i, :, :, : pr.shape[-1]] = pr
        expert_masks[i, :, : mk.shape[-1]] = mk
    np.savez_compressed(
        out / "golden.npz",
        lang_ids=lang[0].numpy().astype(np.int64), lang_mask=lang_mask[0].numpy().astype(bool),
        state_normalized=batch["observation.state"][0].numpy(), instruction=np.array(instruction),
        state=np.array(state, np.float32),
        prefix_valid=prefix_pad[0].numpy().astype(bool),  # (Tp,) False: padding lerobot masks for every query
        prefix_mask=mask2d[0].numpy(), prefix_ar=prefix_att[0].numpy().astype(np.int64),
        prefix_attentions=np.stack([c[1] for c in prefix_calls]),  # (L, nh, Tp, Tp)
        expert_attentions=expert_maps, expert_masks=expert_masks,  # (L_e, nh, Ta, Tp+Ta), (L_e, Ta, Tp+Ta)
        pixels=np.stack([img[0].numpy() for img in images]),  # (N, 3, 24, 24), padded cameras included
        vision_attentions=np.stack(vis),  # (N, L_v, nh_v, P, P)
        noise_seed=np.int64(NOISE_SEED), time=np.float32(TIME), noise=x_maps,
        velocity_cases=np.array(VELOCITY_CASES, np.float64), velocities=np.stack(velocities),  # (C, Ta, A)
        **extra,
    )
    print(f"wrote {out}: prefix {Tp} tokens ({int(prefix_pad.sum())} valid), {len(prefix_calls)} VLM layers, "
          f"{len(expert_calls)} expert layers")
    for f in sorted(out.rglob("*")):
        if f.is_file():
            print(f"  {f.relative_to(out)}  {f.stat().st_size:,} B")


def main() -> None:
    make(OUT, CAMERAS, STATE, INSTRUCTION)
    # markers around each image, fewer expert layers than VLM layers (beside VLM layers 0 and 2, both
    # self-attention: lerobot 0.4.4 runs such a layout only when the expert's width equals the VLM's key width,
    # its cross-attention k/v projections then fitting self-attention too), a padded empty camera, the instruction
    # padded to max_length (and a long one truncated), chunk 4, a 3-number state; the same tiny SmolVLM
    make(OUT.parent / "tiny_smolvla_markers", {"observation.images.front": (24, 24)}, STATE[:3], "open the drawer",
         vlm="../tiny_smolvla/vlm", long_text="stack the blue cup on the yellow plate then fold the towel in half",
         add_image_special_tokens=True, num_expert_layers=2, expert_width_multiplier=0.5, empty_cameras=1,
         pad_language_to="max_length", chunk_size=4, n_action_steps=4)


if __name__ == "__main__":
    main()
