"""Loading images: every format and mode into uint8 RGB, alpha over white, high bit depths,
EXIF orientation, and every kind of bad data turned into a SourceError."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from attnviz.sources.errors import SourceError
from attnviz.sources.image import load_image

W, H = 20, 12  # non-square on purpose: catches a swapped (H, W)


def gradient_rgb() -> np.ndarray:
    y, x = np.mgrid[0:H, 0:W]
    return np.stack([x * 12, y * 20, (x + y) * 6], axis=-1).astype(np.uint8)  # (H, W, 3)


def encode(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format=fmt, **kw)
    return buf.getvalue()


# ---- formats -------------------------------------------------------------------------------------

LOSSLESS = ["PNG", "BMP", "TIFF"]


@pytest.mark.parametrize("fmt", LOSSLESS)
def test_lossless_formats_keep_every_pixel(tmp_path, fmt):
    rgb = gradient_rgb()
    path = tmp_path / f"img.{fmt.lower()}"
    path.write_bytes(encode(Image.fromarray(rgb), fmt))
    out = load_image(path)
    assert out.dtype == np.uint8 and out.shape == (H, W, 3) and out.flags.c_contiguous
    assert np.array_equal(out, rgb)
    assert np.array_equal(load_image(path.read_bytes()), rgb)  # bytes give the same


def test_webp_lossless_and_lossy():
    rgb = gradient_rgb()
    assert np.array_equal(load_image(encode(Image.fromarray(rgb), "WEBP", lossless=True)), rgb)
    lossy = load_image(encode(Image.fromarray(rgb), "WEBP", quality=90))
    assert lossy.shape == (H, W, 3)
    assert np.abs(lossy.astype(int) - rgb).mean() < 12


def test_jpeg_is_close():
    rgb = gradient_rgb()
    out = load_image(encode(Image.fromarray(rgb), "JPEG", quality=95))
    assert out.shape == (H, W, 3)
    assert np.abs(out.astype(int) - rgb).mean() < 8


def test_gif_first_frame_only():
    red = Image.new("RGB", (W, H), (255, 0, 0))
    blue = Image.new("RGB", (W, H), (0, 0, 255))
    data = encode(red, "GIF", save_all=True, append_images=[blue], duration=100, loop=0)
    assert Image.open(io.BytesIO(data)).n_frames == 2
    out = load_image(data)
    assert out.shape == (H, W, 3)
    assert (out == [255, 0, 0]).all()


def test_multipage_tiff_first_page():
    first = Image.new("L", (W, H), 30)
    data = encode(first, "TIFF", save_all=True, append_images=[Image.new("L", (W, H), 200)])
    assert (load_image(data) == 30).all()


def test_file_object():
    rgb = gradient_rgb()
    assert np.array_equal(load_image(io.BytesIO(encode(Image.fromarray(rgb), "PNG"))), rgb)


# ---- modes ---------------------------------------------------------------------------------------


def test_mode_1_and_L():
    bw = Image.fromarray((gradient_rgb()[..., 0] > 100))  # mode "1"
    assert bw.mode == "1"
    out = load_image(encode(bw, "PNG"))
    assert set(np.unique(out)) <= {0, 255}
    assert np.array_equal(out[..., 0], np.where(gradient_rgb()[..., 0] > 100, 255, 0))
    grey = gradient_rgb()[..., 1]
    out = load_image(encode(Image.fromarray(grey), "PNG"))
    assert np.array_equal(out, np.repeat(grey[..., None], 3, axis=2))


def test_palette_P_with_and_without_transparency():
    im = Image.fromarray(gradient_rgb()).convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    plain = load_image(encode(im, "PNG"))
    assert np.array_equal(plain, np.asarray(im.convert("RGB")))
    idx = np.asarray(im)[0, 0]
    im.info["transparency"] = int(idx)
    out = load_image(encode(im, "PNG", transparency=int(idx)))
    transparent = np.asarray(im) == idx
    assert (out[transparent] == 255).all()  # transparent palette entries become white


@pytest.mark.parametrize("fmt", ["PNG", "TIFF", "WEBP"])
def test_rgba_is_composited_over_white(fmt):
    rgba = np.zeros((H, W, 4), np.uint8)
    rgba[..., 0] = 200  # red-ish everywhere
    rgba[:, : W // 2, 3] = 0  # left half fully transparent
    rgba[:, W // 2 :, 3] = 255  # right half opaque
    rgba[0, -1, 3] = 128  # one half-transparent pixel
    kw = {"lossless": True, "exact": True} if fmt == "WEBP" else {}
    out = load_image(encode(Image.fromarray(rgba), fmt, **kw))
    assert (out[:, : W // 2] == 255).all()
    assert (out[1:, W // 2 :] == [200, 0, 0]).all()
    a = 128 / 255
    assert np.array_equal(out[0, -1], np.rint([200 * a + 255 * (1 - a), 255 * (1 - a), 255 * (1 - a)]).astype(np.uint8))


@pytest.mark.parametrize("mode", ["RGBA", "LA", "PA", "P"])
def test_alpha_drop_gives_the_stored_colours_as_convert_rgb(mode):
    rgba = np.random.default_rng(3).integers(0, 256, size=(H, W, 4), dtype=np.uint8)
    rgba[:, : W // 2, 3] = 0  # transparent, with colours stored under it
    im = Image.fromarray(rgba, "RGBA")
    if mode == "P":
        im = im.convert("RGB").convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
        data = encode(im, "PNG", transparency=int(np.asarray(im)[0, 0]))
    else:
        im = im if mode == "RGBA" else im.convert(mode)
        data = encode(im, "PNG" if mode != "PA" else "TIFF")
    with Image.open(io.BytesIO(data)) as ref:
        want = np.asarray(ref.convert("RGBA").convert("RGB"))  # what transformers' convert("RGB") yields
    out = load_image(data, alpha="drop")
    assert out.dtype == np.uint8 and np.array_equal(out, want)
    assert not np.array_equal(load_image(data), out)  # the default composites over white instead


def test_unknown_alpha_policy_is_refused():
    with pytest.raises(SourceError, match="alpha must be one of white, drop"):
        load_image(encode(Image.fromarray(gradient_rgb()), "PNG"), alpha="black")


def test_LA_and_PA():
    la = np.zeros((H, W, 2), np.uint8)
    la[..., 0] = 40
    la[:, :5, 1] = 0
    la[:, 5:, 1] = 255
    out = load_image(encode(Image.fromarray(la), "PNG"))
    assert (out[:, :5] == 255).all() and (out[:, 5:] == 40).all()
    pa = Image.fromarray(gradient_rgb()).convert("P").convert("PA")
    assert pa.mode == "PA"
    out = load_image(encode(pa, "TIFF"))
    assert out.shape == (H, W, 3)


def test_cmyk_jpeg_and_tiff():
    cmyk = Image.new("CMYK", (W, H), (0, 255, 255, 0))  # pure red in CMYK
    for fmt in ("TIFF", "JPEG"):
        out = load_image(encode(cmyk, fmt))
        assert out.shape == (H, W, 3)
        assert out[..., 0].min() > 230 and out[..., 1].max() < 25 and out[..., 2].max() < 25, fmt


def test_ycbcr_tiff():
    im = Image.fromarray(gradient_rgb()).convert("YCbCr")
    out = load_image(encode(im, "TIFF"))
    assert np.abs(out.astype(int) - gradient_rgb()).max() <= 3


def test_16_bit_grey_is_scaled():
    a = (np.arange(H * W).reshape(H, W) * 270).astype(np.uint16)  # up to ~64k
    for fmt in ("PNG", "TIFF"):
        im = Image.fromarray(a)
        assert im.mode.startswith("I;16")
        out = load_image(encode(im, fmt))
        assert np.array_equal(out[..., 0], np.rint(a / 65535 * 255).astype(np.uint8)), fmt
        assert np.array_equal(out[..., 0], out[..., 2])


def test_16_bit_big_endian_tiff():
    a = (np.arange(H * W).reshape(H, W) * 200).astype(np.uint16)
    im = Image.frombytes("I;16B", (W, H), a.astype(">u2").tobytes())  # (convert() would clip at 255)
    data = encode(im, "TIFF")
    assert Image.open(io.BytesIO(data)).mode == "I;16B"
    assert np.array_equal(load_image(data)[..., 1], np.rint(a / 65535 * 255).astype(np.uint8))


def test_32_bit_int_and_float_tiff():
    ints = np.arange(H * W, dtype=np.int32).reshape(H, W)  # 0..239: read as 8-bit
    out = load_image(encode(Image.fromarray(ints), "TIFF"))
    assert np.array_equal(out[..., 0], ints.astype(np.uint8))
    wide = (ints - 100) * 1000  # negative and large: stretched min..max
    out = load_image(encode(Image.fromarray(wide.astype(np.int32)), "TIFF"))
    assert out[..., 0].min() == 0 and out[..., 0].max() == 255
    assert out[0, 0, 0] == 0 and out[-1, -1, 0] == 255
    unit = (ints / ints.max()).astype(np.float32)  # 0..1 floats
    out = load_image(encode(Image.fromarray(unit), "TIFF"))
    assert np.array_equal(out[..., 0], np.rint(unit.astype(np.float64) * 255).astype(np.uint8))


def test_float_tiff_with_nan_is_refused():
    f = np.ones((H, W), np.float32)
    f[3, 4] = np.nan
    with pytest.raises(SourceError, match="NaN or infinite"):
        load_image(encode(Image.fromarray(f), "TIFF"))


def test_exif_orientation_is_applied():
    rgb = gradient_rgb()
    im = Image.fromarray(rgb)
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
    out = load_image(encode(im, "JPEG", quality=95, exif=exif.tobytes()))
    assert out.shape == (W, H, 3)


# ---- bad data ------------------------------------------------------------------------------------


def test_empty_data_and_files(tmp_path):
    with pytest.raises(SourceError, match="empty"):
        load_image(b"")
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    with pytest.raises(SourceError, match="empty"):
        load_image(empty)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(SourceError, match="not found"):
        load_image(tmp_path / "missing.png")
    with pytest.raises(SourceError, match="folder"):
        load_image(tmp_path)
    with pytest.raises(SourceError, match="path or bytes"):
        load_image(12345)


def test_not_an_image():
    with pytest.raises(SourceError, match="not an image"):
        load_image(b"hello, this is a page of text and not a picture at all")


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "TIFF", "WEBP", "BMP"])
def test_truncated_data(fmt):
    rng = np.random.default_rng(0)
    noisy = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)  # incompressible, so cutting hurts
    data = encode(Image.fromarray(noisy), fmt)
    with pytest.raises(SourceError, match="corrupt or truncated|not an image"):
        load_image(data[: len(data) // 2])


def test_corrupt_png_body():
    data = bytearray(encode(Image.fromarray(gradient_rgb()), "PNG"))
    idat = data.index(b"IDAT")
    data[idat + 8 : idat + 40] = bytes(32)  # zero part of the compressed stream
    with pytest.raises(SourceError, match="corrupt or truncated"):
        load_image(bytes(data))


def test_too_many_pixels_is_refused_before_decoding():
    data = encode(Image.new("L", (400, 300)), "PNG")
    with pytest.raises(SourceError, match=r"400x300 = 0\.1 megapixels, more than the limit"):
        load_image(data, max_pixels=100_000)
    assert load_image(data, max_pixels=120_000).shape == (300, 400, 3)
    with pytest.raises(SourceError, match="max_pixels"):
        load_image(data, max_pixels=0)


def test_png_header_claiming_a_giant_image_is_refused():
    """A real bomb's signature: a tiny file whose header claims 100000 x 100000 pixels."""
    import struct
    import zlib

    data = bytearray(encode(Image.new("L", (4, 4)), "PNG"))
    ihdr = data.index(b"IHDR")
    data[ihdr + 4 : ihdr + 12] = struct.pack(">II", 100_000, 100_000)
    crc = zlib.crc32(bytes(data[ihdr : ihdr + 17])) & 0xFFFFFFFF
    data[ihdr + 17 : ihdr + 21] = struct.pack(">I", crc)
    assert len(data) < 200
    with pytest.raises(SourceError, match="decompression bomb"):
        load_image(bytes(data))  # the default 40 MP limit
    with pytest.raises(SourceError, match="decompression bomb"):
        load_image(bytes(data), max_pixels=None)  # Pillow's own limit


def test_pillow_decompression_bomb_warning_is_an_error(monkeypatch):
    data = encode(Image.new("L", (100, 100)), "PNG")  # 10k pixels
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 6_000)  # warning band: 6k..12k
    with pytest.raises(SourceError, match="decompression bomb"):
        load_image(data, max_pixels=None)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 2_000)  # Pillow's own error band (> 2x)
    with pytest.raises(SourceError, match="decompression bomb"):
        load_image(data, max_pixels=None)
