"""Safe image decoding: bytes or files -> ``uint8`` tensors ``(C, S, S)`` as a model expects.

Used for uploads in the dashboard *and* for decoding ImageFolder datasets, so that an
uploaded image is preprocessed exactly as the training images were. Hostile input
(not an image, truncated data, decompression bombs, empty files) raises :class:`ImageError`
with a message meant for the user.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageOps, UnidentifiedImageError

FORMATS = ("PNG", "JPEG", "WEBP", "BMP", "GIF")
MAX_PIXELS = 25_000_000  # 25 megapixels; larger images are refused before decoding
MAX_BYTES = 20 * 1024 * 1024


class ImageError(ValueError):
    """An input that cannot be used as an image; the message says why and what to do."""


def open_image(source: bytes | str | Path, max_pixels: int = MAX_PIXELS) -> Image.Image:
    """Decode the first frame of a PNG/JPEG/WebP/BMP/GIF image, upright (EXIF orientation applied),
    refusing hostile input.

    Raises:
        ImageError: empty input, not an image, an unsupported format, more than
            ``max_pixels`` pixels, or truncated/corrupt data.
    """
    data = Path(source).read_bytes() if isinstance(source, (str, Path)) else bytes(source)
    if not data:
        raise ImageError("the file is empty (0 bytes); choose an image file")
    if len(data) > MAX_BYTES:
        raise ImageError(f"the file is {len(data) / 2**20:.1f} MB; the limit is {MAX_BYTES / 2**20:.0f} MB")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=FORMATS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise ImageError(
            f"the image has more pixels than the limit of {max_pixels:,} ({error}); downscale it"
        ) from error
    except UnidentifiedImageError as error:
        raise ImageError(f"not a readable image: the file is not {', '.join(FORMATS[:-1])} or {FORMATS[-1]}") from error
    except (OSError, ValueError, SyntaxError) as error:
        raise ImageError(f"cannot read the image header: {error}") from error
    width, height = image.size
    if width * height > max_pixels:
        raise ImageError(
            f"the image is {width}x{height} = {width * height:,} pixels, more than the limit of {max_pixels:,}; "
            "downscale it and upload again"
        )
    if width == 0 or height == 0:
        raise ImageError(f"the image has no pixels ({width}x{height})")
    try:
        image.seek(0)  # first frame of an animation
        image.load()
    except (OSError, ValueError, SyntaxError, EOFError) as error:
        raise ImageError(f"the image data is truncated or corrupt: {error}") from error
    try:  # EXIF orientation first: a phone photo stored sideways reaches the model upright
        return ImageOps.exif_transpose(image)
    except (OSError, ValueError, SyntaxError, TypeError) as error:  # a malformed EXIF block
        raise ImageError(f"the image's EXIF orientation cannot be read: {error}") from error


def to_mode(image: Image.Image, channels: int) -> Image.Image:
    """Convert any PIL mode to ``L`` (1 channel) or ``RGB`` (3 channels).

    16-bit and 32-bit greyscale are rescaled to 8 bits; transparency is composited
    over black; palettes and CMYK are converted.
    """
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, got {channels}")
    if image.mode in ("I", "I;16", "I;16B", "I;16L", "I;16N", "F"):
        array = np.asarray(image, dtype=np.float64)
        top = 1.0 if image.mode == "F" and array.max() <= 1.0 else (255.0 if array.max() <= 255 else 65535.0)
        image = Image.fromarray(np.clip(array / top * 255.0, 0, 255).round().astype(np.uint8), mode="L")
    if image.mode == "P":
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "LA", "PA", "La", "RGBa"):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (0, 0, 0, 255))
        image = Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("L" if channels == 1 else "RGB")


def shrink(image: Image.Image, size: int) -> Image.Image:
    """Box-reduce an image much larger than ``size x size`` by an integer factor, keeping at least ``2 * size``
    pixels on its short side, before any mode conversion: a 16-bit 5000x5000 PNG then costs what a
    ~``2 * size`` one does instead of float copies of 25 M pixels. Modes Pillow cannot reduce are left as they are."""
    factor = min(image.size) // (2 * size)
    if factor < 2:
        return image
    if image.mode.startswith("I;16"):
        image = image.convert("I")
    try:
        return image.reduce(factor)
    except ValueError:  # palette, 1-bit, CMYK: converted full size as before
        return image


def to_tensor(image: Image.Image, channels: int, size: int) -> torch.Tensor:
    """Centre-crop to a square, resize to ``size x size``: ``uint8`` tensor ``(C, size, size)``.
    Large images are box-reduced first (:func:`shrink`)."""
    image = to_mode(shrink(image, size), channels)
    if image.size != (size, size):
        image = ImageOps.fit(image, (size, size), method=Image.Resampling.BILINEAR)
    array = np.asarray(image, dtype=np.uint8)
    if array.ndim == 2:
        array = array[:, :, None]
    return torch.from_numpy(array.copy()).permute(2, 0, 1).contiguous()


def load_image_tensor(source: bytes | str | Path, channels: int, size: int) -> torch.Tensor:
    """:func:`open_image` then :func:`to_tensor`."""
    return to_tensor(open_image(source), channels, size)


__all__ = [
    "FORMATS",
    "MAX_BYTES",
    "MAX_PIXELS",
    "ImageError",
    "load_image_tensor",
    "open_image",
    "shrink",
    "to_mode",
    "to_tensor",
]
