"""``attnviz-cli maps FILE``: what a file of attention maps holds (``.npz`` or ``.safetensors``, as
``attnviz.save`` or ``attnviz-cli model inspect --npz`` write them) — its shape, its tokens and each head's
summaries (entropy, attention to the first token, to special tokens; for self-attention also to itself,
to the previous token and the mean distance) — read and checked as the window reads it.
"""

from __future__ import annotations

import json

import numpy as np

SHOWN_TOKENS = 64  # tokens printed in full; longer lists are cut in the middle
COLUMNS = (("entropy", "entropy", "entropy"), ("to_first", "to first", "to_first"),
           ("to_special", "to special", "to_special"), ("to_self", "to self", "to_self"),
           ("to_previous", "to previous", "to_previous"), ("distance", "distance", "distance"))


def register(subparsers) -> None:
    p = subparsers.add_parser("maps", help="describe a file of attention maps (.npz / .safetensors)",
                              description=__doc__.splitlines()[0].replace("``", ""))
    p.add_argument("file", metavar="FILE", help="a .npz or .safetensors file of attention maps")
    p.add_argument("--json", action="store_true", help="print the shape, tokens and summaries as JSON")
    p.set_defaults(func=run_maps)


def _token_line(tokens: list[str]) -> str:
    shown = [f"{i}:{t!r}" for i, t in enumerate(tokens)]
    if len(shown) > SHOWN_TOKENS:
        half = SHOWN_TOKENS // 2
        shown = shown[:half] + [f"... {len(tokens) - 2 * half:,} more ..."] + shown[-half:]
    return " ".join(shown)


def run_maps(args) -> int:
    from attnviz.checkpoints.maps_file import load_maps

    maps = load_maps(args.file)  # CheckpointError (a ValueError): one line, exit code 1
    m = maps.maps
    L, nh, Tq, Tk = maps.shape
    summ = maps.summaries()
    cols = [(field, label, key) for field, label, key in COLUMNS if getattr(summ, field) is not None]
    if args.json:
        out = {"file": str(maps.folder), "title": m.title, "layers": L, "heads": nh, "queries": Tq, "keys": Tk,
               "cross": m.cross, "stored": m.stored, "tokens": m.tokens, "target_tokens": m.target_tokens,
               "image": None if m.image is None else list(m.image.shape),
               "heads_summaries": {key: np.round(getattr(summ, field), 6).tolist() for field, _l, key in cols}}
        print(json.dumps(out, ensure_ascii=False))
        return 0
    print(maps.describe())
    if m.cross:
        print(f"target tokens ({Tq:,}, the query rows): {_token_line(m.target_tokens)}")
        print(f"source tokens ({Tk:,}, the key columns): {_token_line(m.tokens)}")
    else:
        print(f"tokens ({Tk:,}): {_token_line(m.tokens)}")
    if m.image is not None:
        print(f"image: {m.image.shape[1]} x {m.image.shape[0]} pixels")
    print("per head, mean over the query rows that attend to anything (entropy in nats, distance in tokens):")
    print("layer  head" + "".join(f"{label:>13}" for _f, label, _k in cols))
    for layer in range(L):
        for head in range(nh):
            vals = "".join(f"{getattr(summ, f)[layer, head]:13.4f}" for f, _l, _k in cols)
            print(f"{layer:5d} {head:5d}{vals}")
    return 0
