"""ViT patch embedding: ``z_0 = [x_class, x_p^1 E, ..., x_p^N E] + E_pos`` as in the vision transformer.

x_p^n is the n-th flattened patch (P*P*C values in [0, 1]), E (P*P*C, d_model); each part is seeded
or given. Labels are "[CLS]" then "p0" .. "p{N-1}" (patch n at grid row n // gw, column n % gw).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.sources.errors import SourceError, finite_nonnegative, nonnegative_int, positive_int
from attnviz.sources.patches import Patches

CLASS_LABEL = "[CLS]"


@dataclass(frozen=True, eq=False)
class PatchEmbedder:
    """Patch size, width and seed of a ViT-style patch embedding, optionally with fixed arrays."""

    patch: int  # P, the side of a square patch in pixels
    d_model: int  # width of every token vector
    seed: int = 0  # seeds E, the class token and the position embeddings (separate streams)
    with_class_token: bool = True  # prepend x_class, the token that gathers the whole image
    with_positions: bool = True  # add E_pos; switch off when the model adds its own encoding
    channels: int = 3  # colour channels per pixel (RGB)
    class_scale: float = 0.5  # std of a seeded x_class: about the size of x_p E for mid-grey patches
    position_scale: float = 0.1  # std of seeded E_pos: small next to the content, as in a fresh ViT
    projection: np.ndarray | None = None  # (P*P*C, d_model) E, or None to seed it
    class_token: np.ndarray | None = None  # (d_model,) x_class, or None to seed it
    positions: np.ndarray | None = None  # (N+1, d_model) E_pos (N rows without class token), or None

    def __post_init__(self):
        put = object.__setattr__  # frozen: normalise fields once, here
        put(self, "patch", positive_int("patch size", self.patch))
        put(self, "d_model", positive_int("d_model", self.d_model))
        put(self, "seed", nonnegative_int("seed", self.seed))
        put(self, "channels", positive_int("channels", self.channels))
        put(self, "class_scale", finite_nonnegative("class_scale", self.class_scale))
        put(self, "position_scale", finite_nonnegative("position_scale", self.position_scale))
        fan_in = self.patch * self.patch * self.channels
        if self.projection is not None:
            put(self, "projection", _matrix("projection E", self.projection, (fan_in, self.d_model)))
        if self.class_token is not None:
            put(self, "class_token", _matrix("class token", self.class_token, (self.d_model,)))
        if self.positions is not None:
            pos = _matrix("position embeddings", self.positions, None)
            if pos.ndim != 2 or pos.shape[1] != self.d_model:
                raise SourceError(
                    f"position embeddings must have shape (tokens, {self.d_model}) (got {pos.shape})"
                )
            put(self, "positions", pos)

    @classmethod
    def from_arrays(cls, patch: int, projection, class_token=None, positions=None, **kw) -> "PatchEmbedder":
        """An embedder with a given E (and optionally x_class and E_pos); d_model is E's width."""
        E = np.asarray(projection)
        if E.ndim != 2:
            raise SourceError(f"projection E must be 2-D (P*P*C, d_model) (got shape {E.shape})")
        P = positive_int("patch size", patch)
        if E.shape[0] % (P * P):
            raise SourceError(f"projection E has {E.shape[0]} rows, not a multiple of P*P = {P * P}")
        return cls(
            patch=P,
            d_model=E.shape[1],
            channels=E.shape[0] // (P * P),
            projection=E,
            class_token=class_token,
            positions=positions,
            **kw,
        )

    # ---- the three parameter arrays ------------------------------------------------------------

    @property
    def E(self) -> np.ndarray:
        """The (P*P*C, d_model) projection: given, or N(0, 1/(P*P*C)) from the seed."""
        if self.projection is not None:
            return self.projection
        fan_in = self.patch * self.patch * self.channels
        rng = np.random.default_rng([self.seed, 0])
        return rng.standard_normal((fan_in, self.d_model)) / np.sqrt(fan_in)  # (P*P*C, d_model)

    @property
    def x_class(self) -> np.ndarray:
        """The (d_model,) class token: given, or N(0, class_scale^2) from the seed."""
        if self.class_token is not None:
            return self.class_token
        rng = np.random.default_rng([self.seed, 1])
        return rng.standard_normal(self.d_model) * self.class_scale  # (d_model,)

    def position_embeddings(self, n_tokens: int) -> np.ndarray:
        """E_pos for ``n_tokens`` rows (class token included).  Seeded rows do not depend on the
        count: the first k rows are the same for every image size."""
        n_tokens = positive_int("number of tokens", n_tokens)
        if self.positions is not None:
            if self.positions.shape[0] != n_tokens:
                raise SourceError(
                    f"the given position embeddings have {self.positions.shape[0]} rows but this image "
                    f"gives {n_tokens} tokens; use an image with the same grid or seeded positions"
                )
            return self.positions
        rng = np.random.default_rng([self.seed, 2])
        return rng.standard_normal((n_tokens, self.d_model)) * self.position_scale  # (n_tokens, d_model)

    # ---- z_0 --------------------------------------------------------------------------------------

    def n_tokens(self, patches: Patches) -> int:
        return patches.n_patches + (1 if self.with_class_token else 0)

    def embed(self, patches: Patches) -> np.ndarray:
        """z_0 = [x_class, x_p^1 E, ..., x_p^N E] + E_pos -> (N+1, d_model) float64 (N rows without
        the class token)."""
        if not isinstance(patches, Patches):
            raise SourceError(f"embed expects Patches from patchify (got {type(patches).__name__})")
        if patches.patch != self.patch:
            raise SourceError(
                f"the patches are {patches.patch}x{patches.patch} but this embedder expects "
                f"{self.patch}x{self.patch}; cut the image with patch size {self.patch}"
            )
        if patches.channels != self.channels:
            raise SourceError(f"the patches have {patches.channels} channels but E expects {self.channels}")
        z = patches.pixels @ self.E  # (N, d_model)
        if self.with_class_token:
            z = np.concatenate([self.x_class[None, :], z], axis=0)  # (N+1, d_model)
        if self.with_positions:
            z = z + self.position_embeddings(z.shape[0])  # (N+1, d_model)
        return np.ascontiguousarray(z, dtype=np.float64)

    def labels(self, patches: Patches) -> list[str]:
        """``"[CLS]"`` (if used) then ``"p0" .. "p{N-1}"``, one per row of :meth:`embed`."""
        return ([CLASS_LABEL] if self.with_class_token else []) + patches.labels()


def _matrix(name: str, value, shape) -> np.ndarray:
    a = np.asarray(value)
    if a.dtype == object or not np.issubdtype(a.dtype, np.number) or np.iscomplexobj(a):
        raise SourceError(f"{name} must be real numbers (got dtype {a.dtype})")
    if shape is not None and a.shape != shape:
        raise SourceError(f"{name} must have shape {shape} (got {a.shape})")
    a = np.array(a, dtype=np.float64)  # our own copy
    if not np.isfinite(a).all():
        raise SourceError(f"{name} contains NaN or infinite values")
    a.flags.writeable = False
    return a
