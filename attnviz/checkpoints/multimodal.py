"""What one forward pass of a vision-language(-action) model gives a view: the whole sequence's tokens,
every layer's and head's attention over it, the model's own mask, its named segments and where each
image token sits in the picture.

Every multimodal family (LLaVA, PaliGemma, Idefics3 / SmolVLM, robot policies) returns a
:class:`MultimodalAttention`; views and the command line read nothing family-specific.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attnviz.checkpoints.errors import CheckpointError


@dataclass(frozen=True)
class Segment:
    """A named run of tokens [start, stop): "image", "prefix", "suffix", "state", "actions" ..."""

    name: str  # shown in the Mask workspace and written to the .npz's ``segments``
    start: int  # first token
    stop: int  # one past the last token

    def __len__(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class PatchGroup:
    """One image (or one tile of it) as tokens: a row-major grid of patch tokens over a region of the picture."""

    image: int  # which input image (0 for one-image models)
    name: str  # "image", "tile 1,2", "global image"
    tokens: np.ndarray  # (gh * gw,) int64 sequence positions of the grid's tokens, row-major
    grid: tuple[int, int]  # (gh, gw) tokens per column and row of the grid
    box: tuple[float, float, float, float]  # (top, left, bottom, right) in the original image's pixels

    def token_map(self, values: np.ndarray) -> np.ndarray:
        """(gh, gw) picture of one value per sequence token (e.g. a query's attention row)."""
        return np.asarray(values)[self.tokens].reshape(self.grid)  # (gh, gw)


@dataclass(eq=False)
class MultimodalAttention:
    """One forward pass of a multimodal model over one sequence of image, text (and robot) tokens."""

    model: str  # checkpoint display name
    family: str  # "llava" | "paligemma" | "idefics3" | "pi0" | "smolvla" ...
    tokens: list[str]  # (T,) token text; image tokens as the processor writes them ("<image>")
    labels: list[str]  # (T,) labels for plot axes: image tokens as "img r,c", whitespace made visible
    special: np.ndarray  # (T,) bool: BOS, image markers, row/column tokens, the image tokens themselves
    ids: np.ndarray  # (T,) int64 token ids as the model's processor expands them (image tokens included)
    attentions: np.ndarray  # (L, nh, T, T) the language model's softmax weights, rows = queries
    mask: np.ndarray  # (T, T) bool: True where the model lets query i see key j
    segments: tuple[Segment, ...]  # named runs covering the sequence in order
    patches: tuple[PatchGroup, ...]  # where every image token sits in the picture
    images: list[np.ndarray]  # the original (H, W, 3) uint8 images, for overlays
    hidden: np.ndarray  # (T, d_model) the language model's last hidden state (after its final norm)
    pixels: np.ndarray | None = None  # (N, 3, H, W) float32 pixel values the vision tower saw
    vision_attentions: np.ndarray | None = None  # (N, L_v, nh_v, P, P) the vision tower's own maps, per image/tile
    kv_group: int = 1  # query heads per key/value head of the language model
    notes: tuple[str, ...] = field(default_factory=tuple)  # one-line facts for a status bar ("feature layer -2" ...)
    action_attentions: np.ndarray | None = None  # policies: (L, nh, T_a, T) the action expert's maps
    action_mask: np.ndarray | None = None  # policies: (T_a, T) what each action-expert query may see
    extra: dict = field(default_factory=dict)  # family-specific arrays model inspect writes too ("velocity" ...)

    kind = "multimodal"

    @property
    def T(self) -> int:
        return len(self.tokens)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return tuple(self.attentions.shape)

    def segment(self, name: str) -> Segment:
        for s in self.segments:
            if s.name == name:
                return s
        raise CheckpointError(f"no segment {name!r} (segments: {', '.join(s.name for s in self.segments)})")

    def image_tokens(self) -> np.ndarray:
        """(N_img,) int64 sequence positions of every image token, in patch-group order."""
        if not self.patches:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([g.tokens for g in self.patches])

    def share_to(self, layer_maps: np.ndarray, queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """(L,) mean over ``queries`` (and heads) of the attention given to ``keys``: per layer, how much
        the text (or action) tokens look at the image, the text, the first token."""
        a = np.asarray(layer_maps)  # (L, nh, T, T)
        q = np.asarray(queries, dtype=np.int64)
        k = np.asarray(keys, dtype=np.int64)
        if q.size == 0 or k.size == 0:
            return np.zeros(a.shape[0])
        return a[:, :, q][..., k].sum(axis=-1, dtype=np.float64).mean(axis=(1, 2))  # (L,)


def check_segments(segments: tuple[Segment, ...], T: int) -> None:
    """Segments must cover 0..T in order without gaps (a family's bug, not a user's input)."""
    at = 0
    for s in segments:
        if s.start != at or s.stop <= s.start:
            raise CheckpointError(f"segment {s.name!r} ({s.start}..{s.stop}) does not follow at {at}")
        at = s.stop
    if at != T:
        raise CheckpointError(f"segments end at {at}, the sequence has {T} tokens")


def segments_from_runs(names: list[str]) -> tuple[Segment, ...]:
    """(T,) per-token segment names -> the runs of equal names, in order."""
    out: list[Segment] = []
    start = 0
    for t in range(1, len(names) + 1):
        if t == len(names) or names[t] != names[start]:
            out.append(Segment(names[start], start, t))
            start = t
    return tuple(out)


@dataclass(frozen=True, eq=False)
class MultimodalCheckpoint:
    """A loaded vision-language(-action) checkpoint: its parts' weights, tokenizer, processor settings and the
    family's forward pass. :meth:`run` takes images and a prompt as the model's own processor reads them."""

    folder: object  # Path it was loaded from
    name: str  # display name
    family: str  # "llava" | "paligemma" | "idefics3" | "smolvla" ...
    spec: object  # the family's checked configuration (its own frozen dataclass)
    weights: object  # parts.load_parts store: canonical names "<part>/<name>"
    tokenizer: object  # sources.text.BpeTokenizer of the language model
    special_tokens: object  # decoder_text.SpecialTokens (BOS / EOS as the tokenizer config says)
    runner: object  # (ckpt, images, text, *, dtype, kernel, **options) -> MultimodalAttention
    summary: str  # one line: parts, sizes, dtype (shown by describe())
    n_images: int = 1  # images one prompt may carry (1 for LLaVA-1.5, PaliGemma; more for Idefics3)
    prompt_hint: str = ""  # how a prompt is written for this family, shown next to the prompt field
    options: tuple[str, ...] = ()  # keyword options run() takes beyond images and text ("suffix", "state", "time" ...)

    kind = "vlm"

    @property
    def n_params(self) -> int:
        return int(self.weights.n_params)

    @property
    def stored_dtype(self) -> str:
        return "+".join(n.lower() for n in self.weights.dtypes())

    def describe(self) -> str:
        n = self.n_params
        size = f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}"
        dt = self.stored_dtype
        computed = "" if dt in ("f32", "f64") else ", computed in float32"
        return f"{self.name}: {self.family}, {self.summary}, {size} weights ({dt}{computed})"

    def run(self, images, text: str, **options) -> MultimodalAttention:
        """Images ((H, W, 3) uint8 each) and a prompt -> every layer's and head's attention over the sequence."""
        images = list(images) if images is not None else []
        if len(images) > self.n_images:
            raise CheckpointError(f"{self.name} takes {self.n_images} image{'s' if self.n_images > 1 else ''} per "
                                  f"prompt; {len(images)} were given")
        unknown = sorted(set(options) - set(self.options) - {"dtype", "kernel"})
        if unknown:
            raise CheckpointError(f"{self.name} ({self.family}) takes no {', '.join(unknown)}"
                                  + (f"; it takes {', '.join(self.options)}" if self.options else ""))
        return self.runner(self, images, text, **options)
