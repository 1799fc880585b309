"""Image -> multiple of P (resize / crop policies), patches (row-major, non-square grids,
exact round trip) and the ViT patch embedding z_0 = [x_class, x_p E ...] + E_pos."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.sources.errors import SourceError
from attnviz.sources.image import PatchEmbedder, Patches, patchify, prepare_image, unpatchify


def image(h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)  # (h, w, 3)


# ---- prepare_image -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, patch, expected",
    [((100, 70, 3), 16, (96, 64)), ((104, 72, 3), 16, (112, 80)), ((20, 17, 3), 16, (16, 16)), ((64, 48, 3), 16, (64, 48))],
)
def test_resize_to_nearest_multiples(shape, patch, expected):
    out = prepare_image(image(*shape[:2]), patch)
    assert out.shape == (*expected, 3) and out.dtype == np.uint8


def test_resize_keeps_an_already_fitting_image():
    rgb = image(32, 48)
    out = prepare_image(rgb, 16)
    assert np.array_equal(out, rgb) and out is not rgb


def test_resize_to_target_and_a_flat_colour_stays_flat():
    flat = np.full((50, 90, 3), (10, 120, 230), np.uint8)
    out = prepare_image(flat, 16, target=(64, 96))
    assert out.shape == (64, 96, 3)
    assert (out == (10, 120, 230)).all()


def test_crop_takes_the_centre():
    rgb = image(100, 70)
    out = prepare_image(rgb, 16, policy="crop")
    assert out.shape == (96, 64, 3)
    assert np.array_equal(out, rgb[2:98, 3:67])


def test_crop_to_target_covers_then_crops():
    rgb = image(60, 120)
    out = prepare_image(rgb, 16, policy="crop", target=(32, 32))
    assert out.shape == (32, 32, 3)
    big = image(64, 96)
    assert np.array_equal(prepare_image(big, 16, policy="crop", target=(64, 64)), big[:, 16:80])  # no scaling needed
    small = image(20, 40)
    assert prepare_image(small, 16, policy="crop", target=(48, 48)).shape == (48, 48, 3)  # scaled up to cover


@pytest.mark.parametrize("policy", ["resize", "crop"])
def test_smaller_than_one_patch(policy):
    with pytest.raises(SourceError, match=r"smaller than one 16x16 patch \(got 10x12"):
        prepare_image(image(10, 12), 16, policy=policy)
    with pytest.raises(SourceError, match="smaller than one 16x16 patch"):
        patchify(image(10, 40), 16)


def test_patch_size_that_does_not_divide_the_target():
    with pytest.raises(SourceError, match=r"patch size 16 does not divide the target size 224x200"):
        prepare_image(image(300, 300), 16, target=(224, 200))
    with pytest.raises(SourceError, match="does not divide"):
        prepare_image(image(300, 300), 10, policy="crop", target=(224, 224))


def test_bad_arguments():
    with pytest.raises(SourceError, match="policy"):
        prepare_image(image(32, 32), 16, policy="stretch")
    with pytest.raises(SourceError, match="patch size must be > 0"):
        prepare_image(image(32, 32), 0)
    with pytest.raises(SourceError, match="whole number"):
        prepare_image(image(32, 32), 2.5)
    with pytest.raises(SourceError, match=r"\(H, W, 3\)"):
        prepare_image(np.zeros((32, 32), np.uint8), 16)
    with pytest.raises(SourceError, match="uint8"):
        prepare_image(np.zeros((32, 32, 3)), 16)
    with pytest.raises(SourceError, match="positive"):
        prepare_image(image(32, 32), 16, target=(0, 16))
    with pytest.raises(SourceError, match="pair"):
        prepare_image(image(32, 32), 16, target=16)


# ---- patchify / unpatchify -------------------------------------------------------------------------


def test_patch_layout_is_row_major_with_channels_last():
    rgb = image(32, 48)
    p = patchify(rgb, 16)
    assert p.grid == (2, 3) and p.patch == 16 and p.channels == 3
    assert p.pixels.shape == (6, 16 * 16 * 3) and p.pixels.dtype == np.float64
    for n in range(6):
        r, c = p.cell(n)
        assert (r, c) == divmod(n, 3)
        block = rgb[16 * r : 16 * r + 16, 16 * c : 16 * c + 16] / 255.0  # (16, 16, 3)
        assert np.array_equal(p.pixels[n], block.reshape(-1))
    assert p.pixels[0, :3].tolist() == (rgb[0, 0] / 255.0).tolist()  # first pixel, its three channels
    assert p.pixels[0, 3:6].tolist() == (rgb[0, 1] / 255.0).tolist()  # then the pixel to its right
    assert p.labels() == ["p0", "p1", "p2", "p3", "p4", "p5"]


@pytest.mark.parametrize("h, w, P", [(32, 48, 16), (48, 32, 16), (14, 70, 7), (9, 9, 3), (5, 5, 1), (16, 16, 16)])
def test_unpatchify_round_trip(h, w, P):
    rgb = image(h, w, seed=h * w)
    p = patchify(rgb, P)
    assert p.grid == (h // P, w // P)
    back = unpatchify(p)
    assert back.shape == (h, w, 3)
    assert np.array_equal(np.rint(back * 255).astype(np.uint8), rgb)


def test_float_pixels_and_their_checks():
    x = np.random.default_rng(1).random((8, 8, 3))
    assert np.array_equal(unpatchify(patchify(x, 4)), x)
    with pytest.raises(SourceError, match=r"\[0, 1\]"):
        patchify(x * 2, 4)
    with pytest.raises(SourceError, match="uint8 or float"):
        patchify(np.zeros((8, 8, 3), np.int32), 4)


def test_patchify_refuses_sizes_that_are_not_multiples():
    with pytest.raises(SourceError, match=r"patch size 16 does not divide the image size 40x32"):
        patchify(image(40, 32), 16)


def test_too_many_patches_or_pixels_are_refused_before_any_work():
    """A tiny hostile PNG of 1024x1024 pixels in 1x1 patches would give a million tokens."""
    big = np.zeros((1024, 1024, 3), dtype=np.uint8)
    with pytest.raises(SourceError, match="1,048,576 patches, more than the 65,536 tokens a source may have"):
        patchify(big, 1)
    assert patchify(big, 4).n_patches == 65_536
    with pytest.raises(SourceError, match="target size 100000x100000 is more than 40 megapixels"):
        prepare_image(image(32, 32), 16, target=(100_000, 100_000))


def test_patches_refuse_inconsistent_shapes():
    with pytest.raises(SourceError, match="do not fit"):
        Patches(pixels=np.zeros((5, 12)), grid=(2, 3), patch=2)


# ---- PatchEmbedder -----------------------------------------------------------------------------------


def test_embed_equals_the_formula():
    rgb = image(32, 48)
    p = patchify(rgb, 16)
    emb = PatchEmbedder(patch=16, d_model=8, seed=3)
    z = emb.embed(p)
    assert z.shape == (7, 8) and z.dtype == np.float64
    E, cls, pos = emb.E, emb.x_class, emb.position_embeddings(7)
    assert E.shape == (768, 8) and cls.shape == (8,) and pos.shape == (7, 8)
    expected = np.vstack([cls] + [p.pixels[n] @ E for n in range(6)]) + pos  # z_0, row by row
    np.testing.assert_allclose(z, expected, rtol=0, atol=1e-12)
    assert emb.labels(p) == ["[CLS]", "p0", "p1", "p2", "p3", "p4", "p5"]


def test_embed_without_class_token_or_positions():
    p = patchify(image(16, 32), 16)
    bare = PatchEmbedder(16, 4, seed=1, with_class_token=False, with_positions=False)
    np.testing.assert_allclose(bare.embed(p), p.pixels @ bare.E, atol=1e-12)
    assert bare.labels(p) == ["p0", "p1"]
    no_pos = PatchEmbedder(16, 4, seed=1, with_positions=False)
    np.testing.assert_allclose(no_pos.embed(p)[0], no_pos.x_class, atol=0)


def test_seeding_is_reproducible_and_seed_dependent():
    p = patchify(image(32, 32), 16)
    a, b, c = PatchEmbedder(16, 8, seed=5), PatchEmbedder(16, 8, seed=5), PatchEmbedder(16, 8, seed=6)
    assert np.array_equal(a.embed(p), b.embed(p))
    assert not np.allclose(a.embed(p), c.embed(p))
    # seeded position rows do not depend on the image size
    assert np.array_equal(a.position_embeddings(5), a.position_embeddings(50)[:5])


def test_embedder_from_arrays():
    P, d = 2, 3
    E = np.arange(P * P * 3 * d, dtype=float).reshape(P * P * 3, d) / 10
    cls = np.array([1.0, -1.0, 0.5])
    pos = np.arange(3 * d, dtype=float).reshape(3, d)
    emb = PatchEmbedder.from_arrays(P, E, class_token=cls, positions=pos)
    assert emb.d_model == d and emb.channels == 3
    x = np.zeros((2, 4, 3), np.uint8)
    x[:, 2:] = 255  # second patch white
    p = patchify(x, P)
    z = emb.embed(p)
    np.testing.assert_allclose(z[0], cls + pos[0])
    np.testing.assert_allclose(z[1], pos[1])  # black patch: x_p E = 0
    np.testing.assert_allclose(z[2], E.sum(axis=0) + pos[2])  # white patch: all ones @ E
    with pytest.raises(SourceError, match="3 rows but this image gives 4 tokens"):
        emb.embed(patchify(np.zeros((2, 6, 3), np.uint8), P))


def test_embedder_rejects_bad_input():
    with pytest.raises(SourceError, match="d_model must be > 0"):
        PatchEmbedder(16, 0)
    with pytest.raises(SourceError, match=r"projection E must have shape \(768, 8\)"):
        PatchEmbedder(16, 8, projection=np.zeros((10, 8)))
    with pytest.raises(SourceError, match="NaN"):
        PatchEmbedder(2, 2, class_token=np.array([np.nan, 0.0]))
    with pytest.raises(SourceError, match="expects 16x16"):
        PatchEmbedder(16, 8).embed(patchify(image(8, 8), 8))
    with pytest.raises(SourceError, match="Patches"):
        PatchEmbedder(16, 8).embed(np.zeros((4, 768)))
    with pytest.raises(SourceError, match="multiple of P"):
        PatchEmbedder.from_arrays(4, np.zeros((10, 3)))
