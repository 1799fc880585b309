"""Hand-built vision-language runs for the tests of the views: a :class:`MultimodalAttention` with random
attention normalised per row under a mask, a grid of image tokens over a small picture, and a stand-in
:class:`MultimodalCheckpoint` whose run gives it. Four shapes: LLaVA (causal, one image), PaliGemma
(prefix-LM: image + prefix bidirectional, suffix causal), SmolVLM (2 x 2 tiles and the global image)
and a robot policy (images, language, state, actions with their own action-expert maps)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.multimodal import (MultimodalAttention, MultimodalCheckpoint, PatchGroup, Segment,
                                            check_segments, segments_from_runs)

IMAGE_TOKEN = "<image>"
LLAVA_PROMPT = "USER: <image>\nWhat is in the picture? ASSISTANT:"
LLAVA_HINT = ("write <image> where the picture goes, e.g. 'USER: <image>\\nWhat is in the picture? "
              "ASSISTANT:'")


def picture(H: int = 48, W: int = 64, seed: int = 0) -> np.ndarray:
    """(H, W, 3) uint8: a colour gradient with a bright square, so overlays have something to sit on."""
    y, x = np.mgrid[0:H, 0:W]
    rgb = np.stack([255 * x / max(W - 1, 1), 255 * y / max(H - 1, 1), np.full((H, W), 96.0)], axis=-1)
    rgb[H // 4:H // 2, W // 4:W // 2] = 250
    rng = np.random.default_rng(seed)
    return np.clip(rgb + rng.normal(0, 6, rgb.shape), 0, 255).astype(np.uint8)  # (H, W, 3)


def masked_softmax(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Softmax over keys of (..., T, T) logits under a (T, T) bool mask; a fully masked row is 0."""
    z = np.where(mask, logits, -np.inf)
    peak = np.max(z, axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    e = np.where(mask, np.exp(z - peak), 0.0)
    s = e.sum(axis=-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def _attentions(rng, L: int, nh: int, mask: np.ndarray) -> np.ndarray:
    Tq, Tk = mask.shape
    return masked_softmax(rng.normal(0, 2.0, (L, nh, Tq, Tk)), mask).astype(np.float32)  # (L, nh, Tq, Tk)


def _run(family, pieces, is_image, mask, segments, patches, images, *, L=2, nh=4, seed=0, special=None,
         action_attentions=None, action_mask=None, labels=None):
    rng = np.random.default_rng(seed)
    T = len(pieces)
    check_segments(segments, T)
    atts = _attentions(rng, L, nh, mask)
    if labels is None:
        labels = list(pieces)
        grid_no = 0
        for g in patches:
            gh, gw = g.grid
            for i, t in enumerate(g.tokens):
                labels[int(t)] = f"img {i // gw},{i % gw}" if len(patches) == 1 else f"t{grid_no} {i // gw},{i % gw}"
            grid_no += 1
    sp = np.asarray(is_image, dtype=bool).copy() if special is None else np.asarray(special, dtype=bool)
    sp[0] = True  # BOS
    ids = np.array([7 if im else 100 + i for i, im in enumerate(is_image)], dtype=np.int64)
    return MultimodalAttention(model=f"tiny_{family}", family=family, tokens=list(pieces), labels=labels,
                               special=sp, ids=ids, attentions=atts, mask=mask, segments=tuple(segments),
                               patches=tuple(patches), images=list(images), hidden=rng.normal(size=(T, 8)),
                               action_attentions=action_attentions, action_mask=action_mask)


def llava_run(seed: int = 0, grid=(4, 4), question: str = "What is in the picture?") -> MultimodalAttention:
    """BOS, 'USER', ':', 16 image tokens (4 x 4 over the centre crop of a 48 x 64 picture), the question:
    causal mask, segments 'text 1', 'image', 'text 2'."""
    words = question.replace("?", " ?").split()
    head = ["<s>", "USER", ":"]
    n_img = grid[0] * grid[1]
    tail = ["\n"] + words + ["ASSISTANT", ":"]
    pieces = head + [IMAGE_TOKEN] * n_img + tail
    is_image = np.array([False] * len(head) + [True] * n_img + [False] * len(tail))
    T = len(pieces)
    mask = np.tril(np.ones((T, T), dtype=bool))
    names = ["text 1"] * len(head) + ["image"] * n_img + ["text 2"] * len(tail)
    img = picture(48, 64, seed)
    patches = (PatchGroup(image=0, name="image", tokens=np.arange(len(head), len(head) + n_img, dtype=np.int64),
                          grid=tuple(grid), box=(0.0, 8.0, 48.0, 56.0)),)
    return _run("llava", pieces, is_image, mask, segments_from_runs(names), patches, [img], seed=seed)


def paligemma_run(seed: int = 1, suffix: str = "a cup") -> MultimodalAttention:
    """16 image tokens, BOS + prompt as the prefix (both seen bidirectionally), the suffix causal."""
    n_img = 16
    prefix = ["<bos>", "caption", " en", "\n"]
    suff = suffix.split() + ["<eos>"]
    pieces = [IMAGE_TOKEN] * n_img + prefix + suff
    is_image = np.array([True] * n_img + [False] * (len(prefix) + len(suff)))
    T = len(pieces)
    P = n_img + len(prefix)
    mask = np.tril(np.ones((T, T), dtype=bool))
    mask[:, :P] = True  # the prefix (image + prompt) is seen by every token
    mask[:P, P:] = False
    segs = (Segment("image", 0, n_img), Segment("prefix", n_img, P), Segment("suffix", P, T))
    patches = (PatchGroup(0, "image", np.arange(n_img, dtype=np.int64), (4, 4), (0.0, 0.0, 48.0, 64.0)),)
    run = _run("paligemma", pieces, is_image, mask, segs, patches, [picture(48, 64, seed)], seed=seed)
    run.special[n_img] = True
    return run


def smolvlm_run(seed: int = 2) -> MultimodalAttention:
    """Four 2 x 2 tiles of a 48 x 64 picture and the global image (2 x 2 over the whole), each tile's tokens
    after a row/column marker token; causal."""
    pieces, is_image, special, names = ["<|im_start|>", "User", ":"], [False] * 3, [True, False, False], ["text"] * 3
    patches = []
    boxes = [(0.0, 0.0, 24.0, 32.0), (0.0, 32.0, 24.0, 64.0), (24.0, 0.0, 48.0, 32.0), (24.0, 32.0, 48.0, 64.0)]
    for i, box in enumerate(boxes + [(0.0, 0.0, 48.0, 64.0)]):
        marker = f"<row_{i // 2 + 1}_col_{i % 2 + 1}>" if i < 4 else "<global-img>"
        pieces.append(marker)
        is_image.append(False)
        special.append(True)
        names.append("text")
        start = len(pieces)
        pieces += ["<image>"] * 4
        is_image += [True] * 4
        special += [True] * 4
        names += ["image"] * 4
        patches.append(PatchGroup(0, f"tile {i // 2 + 1},{i % 2 + 1}" if i < 4 else "global image",
                                  np.arange(start, start + 4, dtype=np.int64), (2, 2), box))
    tail = ["What", " is", " this", "?", "<end_of_utterance>", "Assistant", ":"]
    pieces += tail
    is_image += [False] * len(tail)
    special += [False] * len(tail)
    names += ["text"] * len(tail)
    T = len(pieces)
    mask = np.tril(np.ones((T, T), dtype=bool))
    return _run("idefics3", pieces, np.array(is_image), mask, segments_from_runs(names), patches,
                [picture(48, 64, seed)], seed=seed, special=special)


def policy_run(seed: int = 3, n_actions: int = 4) -> MultimodalAttention:
    """pi0's blocks: images and language see each other, the state sees them and itself, the actions see
    everything and each other; the action expert's own maps for the action queries."""
    n_img = 16
    lang = ["<bos>", "pick", " up", " the", " cup", "\n"]
    pieces = [IMAGE_TOKEN] * n_img + lang + ["<state>"] + [f"<act {i}>" for i in range(n_actions)]
    is_image = np.array([True] * n_img + [False] * (len(pieces) - n_img))
    T = len(pieces)
    a0 = n_img + len(lang) + 1
    P = n_img + len(lang)
    mask = np.zeros((T, T), dtype=bool)
    mask[:P, :P] = True
    mask[P, :P + 1] = True
    mask[a0:, :] = True
    segs = (Segment("images", 0, n_img), Segment("language", n_img, P), Segment("state", P, a0),
            Segment("actions", a0, T))
    patches = (PatchGroup(0, "image", np.arange(n_img, dtype=np.int64), (4, 4), (0.0, 8.0, 48.0, 56.0)),)
    rng = np.random.default_rng(seed + 100)
    a_mask = mask[a0:].copy()
    a_att = masked_softmax(rng.normal(0, 2.0, (2, 4, n_actions, T)), a_mask).astype(np.float32)
    return _run("pi0", pieces, is_image, mask, segs, patches, [picture(48, 64, seed)], seed=seed,
                action_attentions=a_att, action_mask=a_mask)


class _Weights:
    n_params = 12345

    @staticmethod
    def dtypes():
        return ["F32"]


def _llava_runner(ckpt, images, text, **options):
    n = text.count(IMAGE_TOKEN)
    if images and n == 0:
        raise CheckpointError(f"the prompt has no {IMAGE_TOKEN} placeholder: write it where the picture goes, "
                              f"e.g. 'USER: {IMAGE_TOKEN}\\nWhat is in the picture? ASSISTANT:'")
    if n != len(images):
        raise CheckpointError(f"the prompt has {n} {IMAGE_TOKEN} placeholders but {len(images)} images were given")
    question = text.split(IMAGE_TOKEN, 1)[1].split("ASSISTANT")[0].strip() or "?"
    run = llava_run(question=question)
    run.images[0] = np.asarray(images[0])
    H, W = run.images[0].shape[:2]
    side = min(H, W)
    top, left = (H - side) / 2, (W - side) / 2
    g = run.patches[0]
    run.patches = (PatchGroup(0, g.name, g.tokens, g.grid, (top, left, top + side, left + side)),)
    return run


def fake_checkpoint(kind: str = "llava", runner=None, calls: list | None = None) -> MultimodalCheckpoint:
    """A stand-in vision-language checkpoint whose run gives one of the runs above (records its calls)."""
    makers = {"llava": (_llava_runner, LLAVA_HINT, (), 1),
              "paligemma": (lambda c, im, t, **o: paligemma_run(suffix=o.get("suffix") or "a cup"),
                            "the prompt follows the image tokens, e.g. 'caption en'", ("suffix",), 1),
              "idefics3": (lambda c, im, t, **o: smolvlm_run(), "write <image> where each picture goes", (), 2),
              "pi0": (lambda c, im, t, **o: policy_run(), "the task in words, e.g. 'pick up the cup'",
                      ("state", "noise_seed", "time"), 1)}
    run, hint, options, n_images = makers[kind]
    run = runner or run

    def recorded(ckpt, images, text, **opts):
        if calls is not None:
            calls.append((list(images), text, dict(opts)))
        return run(ckpt, images, text, **opts)

    return MultimodalCheckpoint(folder=Path(f"/nonexistent/tiny_{kind}"), name=f"tiny_{kind}", family=kind,
                                spec=None, weights=_Weights(), tokenizer=None, special_tokens=None, runner=recorded,
                                summary="2 layers x 4 heads (a hand-built run)", n_images=n_images,
                                prompt_hint=hint, options=options)
