"""Real photographs and real text found offline, and the edits a near-duplicate survives.

The audit's thresholds are chosen on these (docs/audit.md), the tests check the fingerprints on
them, and the benchmark times them: public-domain or freely licensed photographs that installed
packages ship (scikit-learn's ``china.jpg`` and ``flower.jpg``, matplotlib's
``grace_hopper.jpg``, scikit-image's photographs where it is installed), cut into square tiles
at random places and sizes so a few photographs give many distinct images; and the docstrings
of the Python standard library, paragraphs of real English prose.

Flat synthetic images (``shape_images``) are the other kind of image the thresholds must hold
on: one to three circles, rectangles or triangles of random colours, sizes and places on a flat
background of a random colour, drawn with PIL. Their pHashes crowd together (a flat image has
few low frequencies to tell it apart), which is where a pHash alone finds different images.

The transformations are the ones the thresholds must survive: for images JPEG re-encoding at
quality 30-90, resizing to 50-200%, a crop of up to 10% of each side, brightness +-20%; for text
case, whitespace and punctuation changes and 10% of the words replaced, deleted or inserted.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import io
import re
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance

__all__ = [
    "edit_text",
    "jpeg",
    "photo_files",
    "photo_tiles",
    "png",
    "shape_images",
    "stdlib_texts",
    "transform_image",
]

_SKIMAGE_PHOTOS = (
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "motorcycle_left.png",
    "rocket.jpg",
    "hubble_deep_field.jpg",
    "retina.jpg",
    "brick.png",
    "grass.png",
    "gravel.png",
    "camera.png",
    "coins.png",
    "moon.png",
)


def _package_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def photo_files() -> list[Path]:
    """The photographs installed packages ship, in a fixed order (those present)."""
    found = []
    sklearn = _package_dir("sklearn")
    if sklearn is not None:
        found += [sklearn / "datasets" / "images" / n for n in ("china.jpg", "flower.jpg")]
    mpl = _package_dir("matplotlib")
    if mpl is not None:
        found.append(mpl / "mpl-data" / "sample_data" / "grace_hopper.jpg")
    skimage = _package_dir("skimage")
    if skimage is not None:
        found += [skimage / "data" / n for n in _SKIMAGE_PHOTOS]
    return [p for p in found if p.is_file()]


def photo_tiles(count: int, *, seed: int = 0, side: int = 128) -> list[Image.Image]:
    """``count`` distinct RGB images of ``side`` pixels: square tiles that do not overlap, each
    a quarter of its photograph's shorter side, cut on a grid, taken in a shuffled order."""
    boxes = []
    photos = [Image.open(p).convert("RGB") for p in photo_files()]
    for k, photo in enumerate(photos):
        w, h = photo.size
        cell = min(w, h) // 4
        boxes += [
            (k, (x, y, x + cell, y + cell))
            for y in range(0, h - cell + 1, cell)
            for x in range(0, w - cell + 1, cell)
        ]
    if len(boxes) < count:
        raise ValueError(f"{count} tiles asked for, the photographs found give {len(boxes)}")
    order = np.random.default_rng(seed).permutation(len(boxes))[:count]
    return [
        photos[boxes[i][0]].crop(boxes[i][1]).resize((side, side), Image.Resampling.LANCZOS)
        for i in order
    ]


def shape_images(count: int, *, seed: int = 0, side: int = 96) -> list[Image.Image]:
    """``count`` RGB images of ``side`` pixels: a flat background of a random colour and one to
    three circles, rectangles or triangles of random colours, sizes and places."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        image = Image.new("RGB", (side, side), _colour(rng))
        draw = ImageDraw.Draw(image)
        for _ in range(int(rng.integers(1, 4))):
            x, y = (int(v) for v in rng.integers(0, side * 2 // 3, size=2))
            w, h = (int(v) for v in rng.integers(side // 6, side // 2, size=2))
            box = (x, y, min(side - 1, x + w), min(side - 1, y + h))
            shape = int(rng.integers(3))
            if shape == 0:
                draw.ellipse(box, fill=_colour(rng))
            elif shape == 1:
                draw.rectangle(box, fill=_colour(rng))
            else:
                apex = ((box[0] + box[2]) // 2, box[1])
                draw.polygon([(box[0], box[3]), (box[2], box[3]), apex], fill=_colour(rng))
        out.append(image)
    return out


def _colour(rng: np.random.Generator) -> tuple[int, int, int]:
    r, g, b = (int(v) for v in rng.integers(0, 256, size=3))
    return r, g, b


def png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return buf.getvalue()


def jpeg(image: Image.Image, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    image.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def transform_image(image: Image.Image, rng: np.random.Generator) -> tuple[bytes, str]:
    """A near-duplicate of ``image`` as JPEG bytes, and what was done: one or two of a crop of
    up to 10% per side, a resize to 50-200%, brightness +-20%, then JPEG at quality 30-90."""
    steps = rng.choice(
        ["crop", "resize", "brightness"], size=int(rng.integers(1, 3)), replace=False
    )
    done = []
    for step in steps:
        w, h = image.size
        if step == "crop":
            f = rng.uniform(0.0, 0.1, size=4)
            box = (int(f[0] * w), int(f[1] * h), w - int(f[2] * w), h - int(f[3] * h))
            image = image.crop(box)
            done.append(f"crop {max(f):.0%}")
        elif step == "resize":
            s = float(rng.uniform(0.5, 2.0))
            image = image.resize((max(8, int(w * s)), max(8, int(h * s))), Image.Resampling.BICUBIC)
            done.append(f"resize {s:.0%}")
        else:
            b = float(rng.uniform(0.8, 1.2))
            image = ImageEnhance.Brightness(image).enhance(b)
            done.append(f"brightness {b - 1:+.0%}")
    quality = int(rng.integers(30, 91))
    done.append(f"jpeg q{quality}")
    return jpeg(image, quality), ", ".join(done)


_STDLIB = [
    "abc",
    "argparse",
    "ast",
    "asyncio",
    "base64",
    "bisect",
    "calendar",
    "collections",
    "concurrent.futures",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "email",
    "enum",
    "fractions",
    "ftplib",
    "functools",
    "gettext",
    "glob",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http.client",
    "http.server",
    "imaplib",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "logging",
    "mailbox",
    "math",
    "mimetypes",
    "multiprocessing",
    "numbers",
    "operator",
    "optparse",
    "os",
    "pathlib",
    "pickle",
    "pickletools",
    "platform",
    "plistlib",
    "poplib",
    "pprint",
    "pydoc",
    "queue",
    "random",
    "re",
    "sched",
    "secrets",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "signal",
    "smtplib",
    "socket",
    "socketserver",
    "sqlite3",
    "ssl",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "timeit",
    "tokenize",
    "traceback",
    "unittest",
    "urllib.parse",
    "urllib.request",
    "uuid",
    "warnings",
    "wave",
    "weakref",
    "xml.dom.minidom",
    "xml.etree.ElementTree",
    "zipfile",
    "zoneinfo",
]


def stdlib_texts(min_words: int = 40, max_words: int = 400) -> list[str]:
    """Docstrings of the standard library (modules, classes, functions, methods) of
    ``min_words`` to ``max_words`` words, each once, in a fixed order."""
    seen: set[str] = set()
    out = []
    for name in _STDLIB:
        # Importing and reading a module's docstrings may warn (deprecated names): not ours.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            docs = _docstrings(module)
        for doc in docs:
            n = len(doc.split())
            key = " ".join(doc.lower().split()[:12])
            if min_words <= n <= max_words and key not in seen:
                seen.add(key)
                out.append(doc)
    return _distinct(out)


def _distinct(texts: list[str], similar: float = 0.2) -> list[str]:
    """``texts`` without those sharing ``similar`` or more of their shingles (Jaccard) with an
    earlier one: the library documents some methods twice in nearly the same words."""
    from dsreg.audit.lsh import minhash_pairs
    from dsreg.audit.text import fingerprint_texts

    fp = fingerprint_texts([t.encode() for t in texts])
    pairs = minhash_pairs(fp.minhash, fp.minhash, fp.shingles, fp.shingles, similar)
    later = {int(max(a, b)) for a, b in zip(pairs.query, pairs.stored, strict=True) if a != b}
    return [t for i, t in enumerate(texts) if i not in later]


def _docstrings(module: object) -> list[str]:
    docs = [inspect.getdoc(module) or ""]
    for _, obj in sorted(vars(module).items()):
        if getattr(obj, "__module__", None) != getattr(module, "__name__", None):
            continue
        docs.append(inspect.getdoc(obj) or "")
        if inspect.isclass(obj):
            docs += [inspect.getdoc(m) or "" for _, m in sorted(vars(obj).items()) if callable(m)]
    return docs


_PUNCT = re.compile(r"([,.;:!?])")


def edit_text(text: str, rng: np.random.Generator, vocabulary: list[str]) -> tuple[str, str]:
    """A near-duplicate of ``text`` and what was done: its case, whitespace and punctuation
    changed, and 10% of its words replaced, deleted or inserted (words from ``vocabulary``)."""
    tokens = text.split()
    n_edits = max(1, round(0.1 * len(tokens)))
    for _ in range(n_edits):
        op = rng.integers(3)
        i = int(rng.integers(len(tokens)))
        if op == 0:
            tokens[i] = vocabulary[int(rng.integers(len(vocabulary)))]
        elif op == 1 and len(tokens) > 1:
            del tokens[i]
        else:
            tokens.insert(i, vocabulary[int(rng.integers(len(vocabulary)))])
    out = " ".join(tokens)
    style = int(rng.integers(3))
    out = out.upper() if style == 0 else out.lower() if style == 1 else out.title()
    out = _PUNCT.sub(lambda m: "" if rng.random() < 0.5 else m.group(1) + " ", out)
    out = re.sub(" ", lambda m: "\n" if rng.random() < 0.1 else "  ", out)
    return out, f"case, whitespace, punctuation, {n_edits} of {len(text.split())} words edited"
