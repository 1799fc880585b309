"""``attnviz-cli model inspect`` on a vision-language model or a robot policy: images and a prompt (and a
robot state) in one sequence, written as ids, attentions over the whole sequence, the model's mask and its
named segments."""

from __future__ import annotations

import numpy as np

from attnviz.cli import CliError

SEGMENT_DTYPE = np.dtype([("name", "U32"), ("start", "i8"), ("stop", "i8")])  # one row per segment


def segment_rows(segments) -> np.ndarray:
    """(S,) structured array of (name, start, stop): readable without pickle."""
    return np.array([(s.name, s.start, s.stop) for s in segments], dtype=SEGMENT_DTYPE)


def parse_state(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise CliError(f"--state must be comma-separated numbers x,y,... (got {text!r})") from None
    if not vals or not all(np.isfinite(vals)):
        raise CliError(f"--state must hold finite numbers (got {text!r})")
    return vals


def _options(ckpt, args) -> dict:
    opts: dict = {}
    if args.suffix is not None:
        opts["suffix"] = args.suffix
    state = parse_state(args.state)
    if state is not None:
        opts["state"] = state
    if "noise_seed" in ckpt.options:
        opts["noise_seed"] = args.noise_seed
    if "time" in ckpt.options:
        opts["time"] = args.time
    return opts


def inspect_multimodal(ckpt, args, read_image) -> int:
    """Run ``ckpt`` on --image(s) and --text and write the .npz; prints what was written."""
    from attnviz.checkpoints import CheckpointError
    from attnviz.cli.npz_out import write_npz

    if args.layer is not None or args.chat:
        raise CliError(f"--layer/--head and --chat are for decoder LLMs; {ckpt.name} is a {ckpt.family} model")
    images = [read_image(p) for p in (args.image or [])]
    try:
        res = ckpt.run(images, args.text or "", dtype=args.dtype, kernel=args.kernel, **_options(ckpt, args))
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    out = {"ids": res.ids, "tokens": np.array(res.tokens, dtype=str), "labels": np.array(res.labels, dtype=str),
           "special": res.special, "attentions": res.attentions, "segments": segment_rows(res.segments),
           "mask": res.mask, "hidden": res.hidden}
    for g_i, g in enumerate(res.patches):
        out[f"patch_tokens_{g_i}"] = g.tokens
        out[f"patch_grid_{g_i}"] = np.array(g.grid, dtype=np.int64)
        out[f"patch_box_{g_i}"] = np.array(g.box, dtype=np.float64)
    if res.pixels is not None:
        out["pixel_values"] = res.pixels
    if res.action_attentions is not None:
        out["action_attentions"] = res.action_attentions
        out["action_mask"] = res.action_mask
    for key, val in getattr(res, "extra", {}).items():
        out[key] = val
    write_npz(args.npz, out)
    L, nh, T, _ = res.attentions.shape
    print(ckpt.describe())
    seg = ", ".join(f"{s.name} {s.start}..{s.stop - 1}" for s in res.segments)
    print(f"{T} tokens ({seg}): {' '.join(res.labels) if T <= 40 else ' '.join(res.labels[:40]) + ' ...'}")
    print(f"attentions ({L}, {nh}, {T}, {T}), mask ({T}, {T}) with {int(res.mask.sum()):,} allowed cells -> {args.npz}")
    img = res.image_tokens()
    if img.size:
        text_q = np.flatnonzero(~np.isin(np.arange(T), img) & ~res.special)
        share = res.share_to(res.attentions, text_q, img)
        print("attention of the text tokens to the image, per layer: " + " ".join(f"{v:.3f}" for v in share))
    if res.action_attentions is not None:
        print(f"action_attentions {tuple(res.action_attentions.shape)}")
    for note in res.notes:
        print(note)
    return 0
