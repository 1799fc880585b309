"""The bundled demos: reproducible sessions a person can open, built from the seeds' examples.

``list_demos()`` and ``build_demo(name)``. The seed 001 / 002 demos are hand-set so that attnviz
reproduces the seeds' printed numbers exactly (tests/data/sessions/v1/river-bank.expected.json);
the others are seeded sessions of an image, a VLA mask and a long causal sliding window.
"""

from __future__ import annotations



import numpy as np

from attnviz.model.frozen import FrozenArray
from attnviz.model.mask.presets import preset
from attnviz.model.positional import PositionalConfig
from attnviz.model.segments import Segment
from attnviz.model.state import (CrossConfig, CustomSource, ImageSource, ModelConfig, SessionState, TextSource,
                                 ToySource, ViewState)

_DEMOS = {
    "river-bank": "seed 002: 'by the river bank', hand-set 4-d embeddings; bank attends to river",
    "savings-bank": "seed 002: 'at the savings bank', the same bank embedding attends to savings",
    "translation": "seed 001: cross-attention, je / t' / aime over I / love / you (alignment matrix)",
    "vit-image": "seed 000: a 224x224 image in 16x16 patches with a class token (ViT)",
    "vla-mask": "seed 000: image + prompt + state + FAST actions + action expert under the VLA mask",
    "long-context": "about 3,000 BPE tokens of text under a causal sliding-window mask",
}

# seed 002 -------------------------------------------------------------------------------------
# One head, d_model = hs = 4, no positions, W_o = I. bank's query [2.3, 2.3, 0, 0] asks loudly for content
# words of either sense; keys pull its own ambiguous dimension back. In "by the river bank" its scores /sqrt(4)
# are [0.46, 0, 2.3, 0.69], weights [0.109, 0.069, 0.685, 0.137], output [1.431, 0.062, 0.137, 0]: seed 002's
# numbers to the printed digit; with "savings" the output points down finance ([0.016, 1.476, 0.137, 0]).
_BANK_EMB = {  # [geography, finance, function word, ambiguous word]
    "by": [0.2, 0.0, 1.0, 0.0],
    "the": [0.0, 0.0, 1.0, 0.0],
    "river": [1.0, 0.0, 0.0, 0.0],
    "bank": [0.5, 0.5, 0.0, 1.0],
    "at": [0.0, 0.2, 1.0, 0.0],
    "savings": [0.0, 1.0, 0.0, 0.0],
}
_BANK_WQ = [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [2.3, 2.3, 0.0, 0.0]]
_BANK_WK = [[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [-0.7, -0.7, 0.0, 0.0]]
_BANK_WV = [[2.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [-0.88, -0.55, 1.0, 0.0]]

# seed 001 -------------------------------------------------------------------------------------
# Cross-attention with one head: English embeddings e0, e1, e2, W_q = 2I, W_k = W_v = W_o = I, and each French
# embedding the log of its alignment row, so the softmax gives the row back exactly and so does the output.
ALIGNMENT = {  # seed 001's table: query (French) -> weights over I, love, you
    "je": (0.94, 0.02, 0.04),
    "t'": (0.11, 0.01, 0.88),
    "aime": (0.03, 0.95, 0.02),
}


def list_demos() -> list[tuple[str, str]]:
    """(name, one-line description) of every bundled demo."""
    return list(_DEMOS.items())


def build_demo(name: str) -> SessionState:
    """The demo's session state; ValueError for an unknown name."""
    builders = {"river-bank": lambda: _bank(("by", "the", "river", "bank")),
                "savings-bank": lambda: _bank(("at", "the", "savings", "bank")),
                "translation": _translation, "vit-image": _vit, "vla-mask": _vla, "long-context": _long}
    if name not in builders:
        raise ValueError(f"unknown demo {name!r}; the demos are: {', '.join(_DEMOS)}")
    return builders[name]()


def _one_head(W_q, W_k, W_v, W_o) -> ModelConfig:
    stack = lambda w: FrozenArray(np.asarray(w, dtype=np.float64)[None])  # noqa: E731  (1, d, e)
    return ModelConfig(d_model=4, nh=1, W_q=stack(W_q), W_k=stack(W_k), W_v=stack(W_v),
                       W_o=FrozenArray(np.asarray(W_o, dtype=np.float64)))


def _bank(words: tuple[str, ...]) -> SessionState:
    emb = np.array([_BANK_EMB[w] for w in words])  # (4, 4)
    src = ToySource(" ".join(words), "#0072b2", words, FrozenArray(emb))
    return SessionState(sources=(src,), model=_one_head(_BANK_WQ, _BANK_WK, _BANK_WV, np.eye(4)),
                        positional=PositionalConfig("none"), view=ViewState(query=3))


def _translation() -> SessionState:
    fr = list(ALIGNMENT)
    fr_emb = np.zeros((3, 4))  # (3, 4)
    fr_emb[:, :3] = np.log(np.array([ALIGNMENT[w] for w in fr]))  # scores = log(row) after W_q = 2I, /sqrt(4)
    en_emb = np.eye(3, 4)  # (3, 4) I, love, you = e0, e1, e2
    sources = (ToySource("French (decoder)", "#d55e00", tuple(fr), FrozenArray(fr_emb)),
               ToySource("English (encoder)", "#0072b2", ("I", "love", "you"), FrozenArray(en_emb)))
    return SessionState(sources=sources, cross=CrossConfig(("French (decoder)",), ("English (encoder)",)),
                        model=_one_head(2.0 * np.eye(4), np.eye(4), np.eye(4), np.eye(4)),
                        positional=PositionalConfig("none"), view=ViewState(query=0))


def _image_bytes(name: str) -> bytes:
    from attnviz.sources.image import bundled_image

    return bundled_image(name).read_bytes()


def _vit() -> SessionState:
    img = ImageSource("image", "#009e73", _image_bytes("river-scene.png"), patch=16, policy="resize",
                      target=(224, 224), class_token=True)
    return SessionState(sources=(img,), model=ModelConfig(d_model=64, nh=4, seed=0),
                        positional=PositionalConfig("learned"), view=ViewState(query=0))


VLA_PROMPT = "pick up the red cup and put it on the tray"


def _vla() -> SessionState:
    sources = (
        ImageSource("image", "#009e73", _image_bytes("harbour-wide.png"), patch=32, policy="resize",
                    target=(96, 160), class_token=False),
        TextSource("prompt", "#0072b2", VLA_PROMPT),
        CustomSource("state", "#e69f00", count=1, generator="noise", seed=1, scale=1.0),
        CustomSource("fast actions", "#cc79a7", count=8, generator="noise", seed=2, scale=1.0),
        CustomSource("expert actions", "#d55e00", count=8, generator="noise", seed=3, scale=1.0),
    )
    roles = {"image": "I", "prompt": "P", "state": "P", "fast actions": "A", "expert actions": "E"}
    # the vla preset is written as block rules keyed by segment names, so lengths do not matter here
    segs = [Segment(s.name, i, i + 1, s.color) for i, s in enumerate(sources)]
    mask = preset("vla", segs, roles=roles)
    return SessionState(sources=sources, model=ModelConfig(d_model=64, nh=4, seed=0),
                        positional=PositionalConfig("sinusoidal"), mask=mask)


LONG_CONTEXT_CHARS = 14_000
LONG_CONTEXT_WINDOW = 128


def long_context_text() -> str:
    """The first ~14,000 characters of the bundled corpus, cut at a paragraph end."""
    from attnviz.resources_path import resource_path

    text = resource_path("tokenizer", "corpus.txt").read_text(encoding="utf-8")
    cut = text.rfind("\n\n", 0, LONG_CONTEXT_CHARS)
    return text[: cut if cut > 0 else LONG_CONTEXT_CHARS]


def _long() -> SessionState:
    src = TextSource("corpus", "#0072b2", long_context_text())
    return SessionState(sources=(src,), model=ModelConfig(d_model=64, nh=4, seed=0),
                        positional=PositionalConfig("rope"),
                        mask=preset("sliding_window", w=LONG_CONTEXT_WINDOW, causal_window=True))



