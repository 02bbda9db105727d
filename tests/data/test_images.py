import io
import struct
import zlib

import numpy as np
import pytest
import torch
from PIL import Image

from laya.data.images import MAX_BYTES, ImageError, load_image_tensor, open_image, to_tensor


def encode(image: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format=fmt, **kw)
    return buf.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width x height`` pixels (an image bomb), with no pixel data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


GREY = np.arange(64, dtype=np.uint8).reshape(8, 8) * 4


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "BMP", "GIF"])
def test_supported_formats_decode(fmt):
    rgb = Image.fromarray(np.stack([GREY, 255 - GREY, GREY // 2], axis=-1))
    x = load_image_tensor(encode(rgb, fmt), channels=3, size=8)
    assert x.shape == (3, 8, 8) and x.dtype == torch.uint8
    if fmt in ("PNG", "BMP"):  # lossless
        assert torch.equal(x[0], torch.from_numpy(GREY))


def test_modes_convert_to_the_model_channels():
    cases = {
        "L": Image.fromarray(GREY),
        "RGB": Image.fromarray(np.stack([GREY] * 3, -1)),
        "RGBA": Image.fromarray(np.dstack([GREY, GREY, GREY, np.full_like(GREY, 255)]), "RGBA"),
        "P": Image.fromarray(GREY).convert("P"),
        "CMYK": Image.fromarray(np.stack([GREY] * 3, -1)).convert("CMYK"),
        "1": Image.fromarray(GREY).convert("1"),
        "LA": Image.fromarray(GREY).convert("LA"),
    }
    for mode, image in cases.items():
        assert image.mode == mode
        for channels in (1, 3):
            x = to_tensor(image, channels, 8)
            assert x.shape == (channels, 8, 8), mode
    assert torch.equal(to_tensor(cases["L"], 1, 8)[0], torch.from_numpy(GREY))
    assert torch.equal(to_tensor(cases["RGBA"], 1, 8)[0], torch.from_numpy(GREY))


def test_sixteen_bit_greyscale_is_rescaled():
    wide = GREY.astype(np.uint16) * 257  # 16-bit version of GREY
    data = encode(Image.fromarray(wide), "PNG")
    image = open_image(data)
    assert image.mode.startswith("I")
    assert torch.equal(to_tensor(image, 1, 8)[0], torch.from_numpy(GREY))


def test_transparency_is_composited_over_black():
    rgba = np.zeros((4, 4, 4), dtype=np.uint8)
    rgba[..., 0] = 200
    rgba[..., 3] = 128  # half transparent red
    x = to_tensor(Image.fromarray(rgba, "RGBA"), 3, 4)
    assert int(x[0, 0, 0]) == pytest.approx(100, abs=1) and int(x[1, 0, 0]) == 0


def test_gif_first_frame_is_used():
    frames = [Image.fromarray(np.full((4, 4), v, dtype=np.uint8)) for v in (10, 240)]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:])
    x = load_image_tensor(buf.getvalue(), 1, 4)
    assert int(x.float().mean()) == pytest.approx(10, abs=2)


def test_centre_crop_and_resize():
    wide = np.zeros((10, 30), dtype=np.uint8)
    wide[:, 10:20] = 255  # white centre square
    x = to_tensor(Image.fromarray(wide), 1, 5)
    assert x.shape == (1, 5, 5) and int(x.min()) > 200


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "empty"),
        (b"this is not an image at all", "not a readable image"),
        (png_header_only(30_000, 30_000), "than the limit"),  # refused by Pillow's bomb check
        (png_header_only(6_000, 6_000), "than the limit"),  # 36 MP: refused by ours, before decoding
        (b"%PDF-1.4 fake", "not a readable image"),
    ],
)
def test_hostile_inputs_raise_image_error(data, message):
    with pytest.raises(ImageError, match=message):
        open_image(data)


def test_truncated_image_raises_image_error():
    noisy = np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    data = encode(Image.fromarray(noisy), "PNG")
    with pytest.raises(ImageError, match="truncated or corrupt"):
        open_image(data[: len(data) // 2])


def test_oversized_file_is_refused():
    with pytest.raises(ImageError, match="limit is"):
        open_image(b"\x89PNG" + b"\0" * (MAX_BYTES + 1))


def test_exif_orientation_is_applied_first():
    """A 'phone photo' stored sideways (EXIF orientation 6: rotate 90° clockwise to view) reaches the model upright."""
    upright = np.zeros((20, 40, 3), dtype=np.uint8)  # wide: left half white, right half black
    upright[:, :20] = 255
    stored = Image.fromarray(upright).transpose(Image.Transpose.ROTATE_90)  # stored tall, rotated anticlockwise
    exif = Image.Exif()
    exif[0x0112] = 6
    data = encode(stored, "JPEG", exif=exif.tobytes(), quality=95)
    image = open_image(data)
    assert image.size == (40, 20)  # width x height restored
    pixels = np.asarray(image.convert("L"), dtype=float)
    assert pixels[:, :20].mean() > 200 and pixels[:, 20:].mean() < 50
    without = open_image(encode(stored, "JPEG", quality=95))
    assert without.size == (20, 40)  # no EXIF tag: left as stored


def test_a_16_bit_5000px_png_decodes_cheaply() -> None:
    """Issue 17, hole 13: a 60 KB 16-bit 5000x5000 PNG is box-reduced before any float conversion."""
    import resource
    import time

    from laya.data.images import load_image_tensor

    pixels = np.zeros((5000, 5000), dtype=np.uint16)
    pixels[::7, ::5] = 60000
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    assert len(buffer.getvalue()) < 100_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.process_time()
    x = load_image_tensor(buffer.getvalue(), 3, 32)
    seconds = time.process_time() - start
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert x.shape == (3, 32, 32) and x.dtype == torch.uint8 and 0 < int(x.max()) <= 255
    assert seconds < 1.5 and grown_mb < 300, (seconds, grown_mb)  # was 2.3 CPU-s and +620 MB
