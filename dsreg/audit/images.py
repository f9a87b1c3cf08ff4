"""Perceptual hashes of images (pHash): 64 bits per image, a pure function of its bytes.

The hash is the one ``imagehash.phash`` computes: the image converted to grayscale (``L``),
resized to 32 x 32 with Lanczos, transformed by the unnormalised 2-D DCT-II (scipy's
``dct(dct(x, axis=0), axis=1)``), and the top-left 8 x 8 block of low frequencies compared
with its own median, one bit per coefficient, row by row, the first bit the most significant
(``int(str(imagehash.phash(im)), 16)`` is the same integer).

What differs is how the work is done, and one documented option:

* The DCT of a whole batch is one matrix product: the 64 low-frequency coefficients of a
  32 x 32 block are ``kron(D8, D8) @ x.ravel()``, with ``D8`` the first 8 rows of the DCT
  matrix, so ``(B, 1024) @ (1024, 64)`` gives them for ``B`` images at once. It is exact
  arithmetic, rounded differently from scipy's FFT; a bit can differ from imagehash's only
  where a coefficient equals the median to within that rounding (about 1e-12 of the
  coefficients' scale), which happens when two of the 64 coefficients tie exactly, as in a
  flat or synthetic image.
* ``reduced_decode=True`` (the default) asks the JPEG decoder for a grayscale image scaled
  down by 1/2, 1/4 or 1/8 (PIL's ``draft``, libjpeg's DCT scaling) while it stays at least
  ``DRAFT_SIDE`` pixels on each side, before the same Lanczos resize. Decoding a 500 x 375
  JPEG that way costs a fraction of the full decode, and the hash moves by a few bits at most
  (the tests bound the distance to imagehash's hash; docs/benchmarks.md has the speed and
  docs/audit.md the precision and recall, both with this default). Other formats are decoded
  in full either way. ``reduced_decode=False`` decodes every image in full, as imagehash does.

Crops. A copy cropped by 5% per side is about 12 bits from its source's pHash, more than the
threshold, so each image also gets the pHashes of ``CROPS``: 16 sub-rectangles that leave
2.5% or 7.5% of each side out (every combination of the four sides), hashed by the same
resize of the same decode (PIL's ``resize`` with a ``box``, sub-pixel exact). A copy cropped
by up to 10% per side lies within 2.5% per side of one of them, whose hash is then near the
copy's full-image hash (how near is measured, not bounded: docs/audit.md has the curve).
The full-image hash stays imagehash's; the crops are extra columns. An image too small for
the smallest crop to leave out a whole pixel (a side under ``CROP_MIN_SIDE``) is its own crop:
its crop hashes are its full-image hash, since sub-pixel crops of a thumbnail-sized image are
resampling noise that only adds chance matches (8 x 8 digits matched other digits).

Thumbnail. Each image also keeps its colours at ``THUMB_SIDE`` x ``THUMB_SIDE`` pixels (RGB,
box-filtered from the same decode): what ``confirm.py`` compares, pixel by pixel, before a pair
of near hashes becomes a finding. The pHash sees only the signs of a grayscale image's low
frequencies, so two different images with the same layout (a circle on a flat background, in
other colours) can have near hashes; their pixels differ.

EXIF orientation is not applied (as in imagehash): a rotated copy is a different image.
Undecodable bytes are reported per item with a one-line reason (the decoder's own error, or
an image of more than ``MAX_DECODED_PIXELS`` pixels to decode) and a zero hash; they never
count as fingerprinted and never stop the batch.
"""

from __future__ import annotations

import io
import itertools
import re
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from dsreg._util.lazy import lazy_imports

# Pillow (the audit extra): imported when an image is first decoded.
with lazy_imports():
    import PIL
    from PIL import Image

__all__ = [
    "CROPS",
    "DRAFT_SIDE",
    "HASH_SIDE",
    "MAX_DECODED_PIXELS",
    "THUMB_SIDE",
    "ImageFingerprints",
    "colour_thumbnail",
    "crop_pixels_of",
    "dct_matrix",
    "fingerprint_images",
    "hashes_of_pixels",
    "hex_hash",
    "open_image",
    "pixels_of",
]

#: The side of the grayscale square the DCT is taken over.
HASH_SIDE = 32
#: The side of the low-frequency block kept: 8 x 8 = 64 bits.
_LOW = 8
#: With ``reduced_decode``, a JPEG is decoded scaled down while both sides stay at least this
#: long: twice the hash side, so the Lanczos filter still has two source pixels per output pixel.
DRAFT_SIDE = 64
#: The crops hashed besides the full image: fractions left out at the (left, top, right,
#: bottom), each 2.5% or 7.5%, every combination. Changing them is a new fingerprint method.
CROPS: tuple[tuple[float, float, float, float], ...] = tuple(
    (left, top, right, bottom)
    for left, top, right, bottom in itertools.product((0.025, 0.075), repeat=4)
)


#: The shortest side whose smallest crop (2.5%) leaves out at least one pixel.
CROP_MIN_SIDE = 40
#: The side of the colour thumbnail kept per image (RGB, 8 x 8 x 3 = 192 bytes).
THUMB_SIDE = 8
#: The most pixels the audit decodes of one image (8192 x 8192): a larger image (after a JPEG's
#: reduced decode) is unreadable, so that one image costs at most a few hundred MB to decode.
#: PIL refuses more than twice its own ``MAX_IMAGE_PIXELS`` itself (a decompression bomb).
MAX_DECODED_PIXELS = 1 << 26
# An object's repr in an error ("<_io.BytesIO object at 0x7f…>"): never part of a reason, which
# is stored and must be the same on every run.
_REPR = re.compile(r" ?<[^<>]* at 0x[0-9a-fA-F]+>")


class ImageFingerprints(NamedTuple):
    """Per item of a batch: its hash, whether it was decoded, and why not."""

    #: ``uint64`` pHash per item; 0 where ``ok`` is false.
    hashes: npt.NDArray[np.uint64]
    #: ``(B, len(CROPS))`` ``uint64``: the pHash of each crop of ``CROPS`` per item; 0 where
    #: ``ok`` is false.
    crops: npt.NDArray[np.uint64]
    #: ``(B, THUMB_SIDE, THUMB_SIDE, 3)`` ``uint8``: each item's colour thumbnail; 0 where
    #: ``ok`` is false.
    thumbs: npt.NDArray[np.uint8]
    #: True where the item was decoded and hashed.
    ok: npt.NDArray[np.bool_]
    #: One line per item saying why it could not be decoded; ``""`` where ``ok``.
    errors: list[str]


def dct_matrix(n: int) -> npt.NDArray[np.float64]:
    """The ``(n, n)`` matrix of scipy's unnormalised DCT-II,
    ``D[k, j] = 2 cos(pi k (2j + 1) / 2n)``: ``D @ x`` is ``scipy.fft.dct(x, type=2, norm=None)``
    along the first axis."""
    k = np.arange(n, dtype=np.float64)[:, None]
    j = np.arange(n, dtype=np.float64)[None, :]
    return 2.0 * np.cos(np.pi * k * (2.0 * j + 1.0) / (2.0 * n))


# (1024, 64): the flattened 32 x 32 block times this is its 8 x 8 low-frequency DCT, flattened
# row by row: kron(D8, D8)[8u + v, 32i + j] = D8[u, i] * D8[v, j].
_LOW_DCT = np.ascontiguousarray(
    np.kron(dct_matrix(HASH_SIDE)[:_LOW], dct_matrix(HASH_SIDE)[:_LOW]).T
)
# Relative to the DC coefficient: far below any coefficient of a real image, far above the
# rounding of a 1,024-term product in float64.
_ZERO_BELOW = 1e-9


def hashes_of_pixels(pixels: npt.NDArray[Any]) -> npt.NDArray[np.uint64]:
    """The pHash of each ``(32, 32)`` grayscale block of ``pixels``, shape ``(B, 32, 32)``.

    One matrix product for the whole batch, then each row's 64 coefficients against their
    median (the mean of the 32nd and 33rd values); bit 63 is coefficient (0, 0).
    """
    blocks = np.asarray(pixels, dtype=np.float64).reshape(-1, HASH_SIDE * HASH_SIDE)
    low = blocks @ _LOW_DCT
    # A coefficient that is zero in exact arithmetic (every one but (0, 0) of a flat image, the
    # odd ones of a mirrored image) comes out of the product as rounding noise, whose sign would
    # decide its bit; imagehash's DCT gives such coefficients as 0, and so does this.
    noise = _ZERO_BELOW * (1.0 + np.abs(low[:, :1]))
    low[np.abs(low) < noise] = 0.0
    bits = low > np.median(low, axis=1, keepdims=True)
    packed = np.packbits(bits, axis=1)  # (B, 8) bytes, the first bit the most significant
    return packed.view(">u8").ravel().astype(np.uint64)


def open_image(payload: bytes) -> Image.Image:
    """``payload`` opened by PIL (nothing decoded yet). Bytes PIL identifies as no format get
    the error of the format whose signature they start with, where one does (a JPEG whose
    markers are damaged: "no marker found"), rather than PIL's "cannot identify image file"."""
    try:
        return Image.open(io.BytesIO(payload))
    except PIL.UnidentifiedImageError:  # a class: read from the module, not named lazily
        Image.init()
        for fmt in Image.ID:
            factory, accept = Image.OPEN[fmt]
            if accept is not None and accept(payload[:16]):
                factory(io.BytesIO(payload), "")  # raises the format's own error
        raise


def _decoded(payload: bytes, reduced_decode: bool) -> Image.Image:
    """The decoded image, a JPEG scaled down by libjpeg if ``reduced_decode``. Raises what PIL
    raises for bytes it cannot decode (a format it does not know, a truncated file, a
    decompression bomb), or ``ValueError`` for more than ``MAX_DECODED_PIXELS`` to decode."""
    with warnings.catch_warnings():
        # Over PIL's pixel limit it warns (and over twice the limit it raises, which is reported):
        # a large image is decoded scaled down where it is a JPEG, else refused over the limit.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        image = open_image(payload)  # over bytes in memory: nothing to close
        if reduced_decode and image.format == "JPEG":
            image.draft("RGB", (DRAFT_SIDE, DRAFT_SIDE))
        w, h = image.size
        if w * h > MAX_DECODED_PIXELS:
            raise ValueError(
                f"{w} x {h} pixels to decode, more than the {MAX_DECODED_PIXELS:,} the audit "
                "decodes"
            )
        image.load()
        return image


def _thumbnail(gray: Image.Image, box: tuple[float, float, float, float] | None = None) -> Any:
    small = gray.resize((HASH_SIDE, HASH_SIDE), Image.Resampling.LANCZOS, box=box)
    return np.asarray(small, dtype=np.uint8)


def colour_thumbnail(image: Image.Image) -> npt.NDArray[np.uint8]:
    """The ``(THUMB_SIDE, THUMB_SIDE, 3)`` RGB box-filtered thumbnail of a decoded image."""
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    small = rgb.resize((THUMB_SIDE, THUMB_SIDE), Image.Resampling.BOX)
    return np.asarray(small, dtype=np.uint8)


def pixels_of(payload: bytes, *, reduced_decode: bool = True) -> npt.NDArray[np.uint8]:
    """The ``(32, 32)`` grayscale Lanczos thumbnail of an encoded image. Raises what PIL raises
    for bytes it cannot decode."""
    result: npt.NDArray[np.uint8] = _thumbnail(_decoded(payload, reduced_decode).convert("L"))
    return result


def crop_pixels_of(payload: bytes, *, reduced_decode: bool = True) -> npt.NDArray[np.uint8]:
    """``(1 + len(CROPS), 32, 32)``: the thumbnail of the full image (``pixels_of``'s), then of
    each crop of ``CROPS``, from one decode. Raises what PIL raises for bytes it cannot decode."""
    return _views(_decoded(payload, reduced_decode).convert("L"))


def _views(gray: Image.Image) -> npt.NDArray[np.uint8]:
    w, h = gray.size
    full = _thumbnail(gray)
    if min(w, h) < CROP_MIN_SIDE:  # no crop leaves out a whole pixel: the image is its crops
        return np.stack([full] * (1 + len(CROPS)))
    boxes = [(a * w, b * h, w - c * w, h - d * h) for a, b, c, d in CROPS]
    return np.stack([full, *(_thumbnail(gray, box) for box in boxes)])


def fingerprint_images(
    payloads: Sequence[bytes], *, reduced_decode: bool = True
) -> ImageFingerprints:
    """pHash every encoded image of ``payloads`` and its ``CROPS``: decode each once and resize
    it and its crops, then one DCT product.

    A pure function of the bytes, item by item (a batch never changes an item's hash), so it
    can run in worker processes or ``map_batches`` unchanged and be stored per payload digest.
    """
    n = len(payloads)
    views = 1 + len(CROPS)
    pixels = np.zeros((n, views, HASH_SIDE, HASH_SIDE), dtype=np.uint8)
    thumbs = np.zeros((n, THUMB_SIDE, THUMB_SIDE, 3), dtype=np.uint8)
    ok = np.zeros(n, dtype=np.bool_)
    errors = [""] * n
    for i, payload in enumerate(payloads):
        try:
            image = _decoded(payload, reduced_decode)
            pixels[i] = _views(image.convert("L"))
            thumbs[i] = colour_thumbnail(image)
        # Untrusted bytes through a third-party decoder: PIL raises OSError, ValueError,
        # SyntaxError, struct.error, DecompressionBombError and more; each is this item's.
        except Exception as exc:
            errors[i] = _reason(exc)
        else:
            ok[i] = True
    hashes = np.zeros((n, views), dtype=np.uint64)
    if ok.any():
        hashes[ok] = hashes_of_pixels(pixels[ok]).reshape(-1, views)
    return ImageFingerprints(
        hashes=np.ascontiguousarray(hashes[:, 0]),
        crops=np.ascontiguousarray(hashes[:, 1:]),
        thumbs=thumbs,
        ok=ok,
        errors=errors,
    )


def hex_hash(value: int | np.uint64) -> str:
    """A hash as imagehash prints it: 16 lowercase hexadecimal digits."""
    return f"{int(value):016x}"


def _reason(exc: BaseException) -> str:
    text = " ".join(_REPR.sub("", str(exc)).split()) or "no detail"
    text = "".join(c if c.isprintable() else "?" for c in text)
    return f"not a decodable image ({type(exc).__name__}: {text[:200]})"
