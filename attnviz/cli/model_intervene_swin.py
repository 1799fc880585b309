"""``attnviz-cli model ablate`` on a Swin checkpoint: heads ablated over one picture, the pooled output (and a
SwinForImageClassification's class logits) before and after.

``ablate MODEL --image PNG --heads L.H[,L.H...] [--mode zero|mean] --npz OUT``: ``L`` is the global block index over
the stages (stage 0's blocks first), ``H`` a head of that block's stage. The .npz holds ``heads``,
``pooled_before`` and ``pooled_after`` (C_last,) (the last stage's tokens averaged, transformers' pooler_output),
``cosine`` of the two, ``hidden_before`` and ``hidden_after`` (T_last, C_last), ``layer_stage`` (L,) each global
layer's stage, and per stage s ``attentions_before_stage{s}`` and ``attentions_after_stage{s}`` (L_s, nh_s, T_s,
T_s), each layer's windows laid into the stage's token map (the stages' token counts differ, so they are not
stacked into one array); with a classifier also ``logits_before``, ``logits_after`` (labels,) and ``kl`` (nats).
"""

from __future__ import annotations

import numpy as np

from attnviz.cli import CliError


def _labels(ckpt) -> dict:
    """Class index -> name from the folder's config.json (empty when it names none)."""
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.config import read_json

    try:
        names = read_json(ckpt.folder / "config.json", "config.json").get("id2label")
    except (CheckpointError, AttributeError):
        return {}
    return {int(k): str(v) for k, v in names.items() if str(k).isdigit()} if isinstance(names, dict) else {}


def _top(logits: np.ndarray, names: dict, k: int = 3) -> str:
    p = np.exp(logits - logits.max())
    p /= p.sum()
    return ", ".join(f"{names.get(int(i), f'#{int(i)}')} {p[i]:.3f}" for i in np.argsort(-p, kind="stable")[:k])


def cmd_swin(args, ckpt) -> int:
    """``model ablate`` on a loaded Swin checkpoint ``ckpt`` (``args``: model ablate's arguments)."""
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.intervention_swin import parse_swin_heads, swin_classifier, swin_layout, swin_run
    from attnviz.checkpoints.interventions import Edit, cosine, kl_divergence
    from attnviz.checkpoints.preprocess import preprocess_image
    from attnviz.cli.npz_out import write_npz
    from attnviz.sources.errors import SourceError
    from attnviz.sources.image import load_image

    if getattr(args, "means", None) is not None:
        raise CliError(f"{ckpt.name} is a Swin model: --means holds a swept model's head means, and Swin's heads are "
                       "not swept; use --mode zero or mean")
    if args.image is None or getattr(args, "text", None) is not None:
        raise CliError(f"{ckpt.name} is a swin image model: give --image, not --text")
    if len(args.image) != 1:
        raise CliError(f"{ckpt.name} reads one image; {len(args.image)} were given")
    if not args.image[0].is_file():
        raise CliError(f"image not found: {args.image[0]}")
    c = ckpt.config
    try:
        x = preprocess_image(load_image(args.image[0], alpha="drop"), ckpt.image)  # (3, H, W)
        lay = swin_layout(c, (x.shape[1] // c.patch_size[0], x.shape[2] // c.patch_size[1]))
        heads = parse_swin_heads(lay, args.heads)
        cls = swin_classifier(ckpt.folder)
        before = swin_run(c, ckpt.weights, x, classifier=cls)
        after = swin_run(c, ckpt.weights, x, Edit(ablate={h: args.mode for h in heads}), cls)
    except SourceError as exc:
        raise CliError(f"{ckpt.name}: {exc}") from None
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    cos = cosine(before.pooled, after.pooled)
    out = {"heads": np.array(heads, dtype=np.int64), "pooled_before": before.pooled, "pooled_after": after.pooled,
           "cosine": np.float64(cos), "hidden_before": before.hidden, "hidden_after": after.hidden,
           "layer_stage": np.array(lay.stage, dtype=np.int64)}
    for s in sorted(set(lay.stage)):
        out[f"attentions_before_stage{s}"] = before.stage_attentions(s)
        out[f"attentions_after_stage{s}"] = after.stage_attentions(s)
    if cls is not None:
        kl = kl_divergence(before.logits, after.logits)
        out |= {"logits_before": before.logits, "logits_after": after.logits, "kl": np.float64(kl)}
    write_npz(args.npz, out)
    print(ckpt.describe())
    where = ", ".join(f"{a}.{b} (stage {lay.stage[a]})" for a, b in heads)
    print(f"{args.mode}-ablated {where}; cosine of the pooled output (the last stage's tokens averaged) before and "
          f"after {cos:.6f} -> {args.npz}")
    if cls is not None:
        names = _labels(ckpt)
        print(f"KL(before || after) of the classes {out['kl']:.4g} nats")
        print(f"before: {_top(before.logits, names)}")
        print(f"after:  {_top(after.logits, names)}")
    return 0
