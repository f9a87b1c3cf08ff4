"""The duplicates audit: fingerprint rate, matching at scale, and the re-audit (docs/benchmarks.md).

    python benchmarks/bench_audit.py rate      # image fingerprints per second, one core
    python benchmarks/bench_audit.py scale     # 50,000 test hashes against 5,000,000 stored
    python benchmarks/bench_audit.py reaudit   # an audit, then again after adding 1% new items
    python benchmarks/bench_audit.py engines   # a corpus fingerprinted on the pool, then on Ray

``rate`` pHashes the same JPEG files with dsreg's batch function (with and without the reduced
JPEG decode) and with imagehash's own loop (``imagehash.phash(Image.open(f))`` per file), on
one core (``DSREG_JOBS=1``). ``scale`` stores 5,000,000 fingerprints as a Parquet file (each
image's pHash and, as the audit stores them, ``--crops`` hashes of its crops: 16, or 0 for the
full-image hash alone), reads them back and finds every pair within the default threshold for
50,000 test hashes (half of them near copies of stored ones), in a child process whose peak
memory and CPU time are reported. ``reaudit``
builds a registry with a training set of real-photograph tiles and a test set, audits, adds 1%
new training items and audits again. ``engines`` fingerprints the same folder of JPEG tiles
and texts with the local process pool (one worker per CPU) and with Ray Data in local mode on
this machine (Ray's start timed apart), as ``--engine ray`` runs them.

Targets (the ``Target`` declarations below; docs/benchmarks.md): ``scale`` at its defaults under
60 s and 1.5 GiB resident; ``reaudit``'s second audit at most 5% of the first's time. ``rate``
and ``engines`` are for information. Exit status 0 only if every target checked passes.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Checks, Target

_JOBS_GIVEN = "DSREG_JOBS" in os.environ
os.environ.setdefault("DSREG_JOBS", "1")
SCALE_TIME = Target("scale: read, index and check every candidate pair, wall", "<", 60, "s")
SCALE_MEMORY = Target("scale: peak resident memory of the matching", "<", 1536, "MiB")
REAUDIT = Target("re-audit after adding 1%: its time / the first audit's", "<=", 5, "%")


def rate(n: int) -> None:
    import imagehash
    from PIL import Image

    from dsreg.audit.corpus import jpeg, photo_files, photo_tiles
    from dsreg.audit.images import fingerprint_images

    sets = {
        "tiles 256 px": [jpeg(t) for t in photo_tiles(min(n, 300), seed=1, side=256)],
        "photographs (full size)": [p.read_bytes() for p in photo_files() if p.suffix == ".jpg"],
    }
    for name, payloads in sets.items():
        runs = {
            "dsreg, reduced decode": lambda p=payloads: fingerprint_images(p),
            "dsreg, full decode": lambda p=payloads: fingerprint_images(p, reduced_decode=False),
            "imagehash loop": lambda p=payloads: [
                imagehash.phash(Image.open(io.BytesIO(b))) for b in p
            ],
        }
        print(f"\n{name}: {len(payloads)} JPEGs")
        for label, run in runs.items():
            best = min(_timed(run) for _ in range(3))
            print(f"  {label:24s} {len(payloads) / best:9.0f} images/s")


def _timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def scale(stored: int, queries: int, threshold: int, crops: int, checks: Checks) -> None:
    """The stored fingerprints written first; then, in a child process (its peak resident
    memory is the matching's alone), read back and matched as the audit matches them."""
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fingerprints.parquet"
        q = _write_stored(path, stored, queries, threshold, crops, rng)
        np.save(Path(tmp) / "queries.npy", q)
        code = (
            "import sys; sys.argv = sys.argv[:1]; import bench_audit as b; "
            f"b._scale_child({str(tmp)!r}, {stored}, {threshold}, {crops})"
        )
        paths = os.pathsep.join([str(Path(__file__).parent), *sys.path])
        subprocess.run(
            [sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": paths}
        )
        took, peak = (float(x) for x in (Path(tmp) / "figures.txt").read_text().split())
    checks.check(SCALE_TIME, took)
    checks.check(SCALE_MEMORY, peak)


def _flip(hashes: np.ndarray, bits: int, rng: np.random.Generator) -> np.ndarray:
    """``hashes`` with up to ``bits`` random bits flipped each."""
    out = hashes.copy()
    for _ in range(bits):
        flip = rng.random(len(out)) < 0.5
        out[flip] ^= np.uint64(1) << rng.integers(0, 64, size=int(flip.sum())).astype(np.uint64)
    return out


def _write_stored(
    path: Path, stored: int, queries: int, threshold: int, crops: int, rng: np.random.Generator
) -> np.ndarray:
    """A fingerprint table's image hashes (``phash``, and ``phash_crops``: ``crops`` hashes per
    image near its own, as crops' are), written in row groups; returns the test hashes, half
    of them near copies of stored images (of their full hash or of one of their crops)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dsreg.formats.tables import ROW_GROUP

    picked = np.sort(rng.choice(stored, size=queries // 2, replace=False))
    near = []
    schema = pa.schema([("phash", pa.uint64()), ("phash_crops", pa.list_(pa.uint64()))])
    with pq.ParquetWriter(path, schema) as writer:  # in row groups as dsreg writes its tables
        for at in range(0, stored, ROW_GROUP):
            full = rng.integers(0, 2**64, size=min(ROW_GROUP, stored - at), dtype=np.uint64)
            variants = np.stack([full, *(_flip(full, 8, rng) for _ in range(crops))], axis=1)
            mine = picked[(picked >= at) & (picked < at + len(full))] - at
            which = rng.integers(0, 1 + crops, size=len(mine))
            near.append(variants[mine, which])
            offsets = pa.array(np.arange(len(full) + 1, dtype=np.int32) * crops)
            lists = pa.ListArray.from_arrays(offsets, pa.array(variants[:, 1:].ravel()))
            writer.write_table(pa.table({"phash": full, "phash_crops": lists}, schema=schema))
    fresh = rng.integers(0, 2**64, size=queries - len(picked), dtype=np.uint64)
    q = np.concatenate([_flip(np.concatenate(near), threshold, rng), fresh])
    return q[rng.permutation(len(q))]


def _scale_child(tmp: str, stored: int, threshold: int, crops: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dsreg.audit.index import Variants, variant_pairs
    from dsreg.audit.matching import image_variants

    q = np.load(Path(tmp) / "queries.npy")
    # The kernels compile on a first call (once per machine; cached on disk after that).
    variant_pairs(q[:10], [Variants(q[:100], np.arange(101), 0)], threshold)
    start, cpu = time.perf_counter(), time.process_time()
    stored_file = pq.ParquetFile(Path(tmp) / "fingerprints.parquet")
    groups = range(stored_file.metadata.num_row_groups)  # one at a time: a bounded peak
    table = pa.concat_tables([stored_file.read_row_group(i, use_threads=False) for i in groups])
    pairs = variant_pairs(q, image_variants(table, np.arange(table.num_rows)), threshold)
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    (Path(tmp) / "figures.txt").write_text(f"{took} {peak}")
    print(
        f"{len(q):,} test hashes vs {stored:,} stored images x {1 + crops} hashes, threshold "
        f"{threshold}: {len(pairs.query):,} pairs in {took:.1f} s, {cpu:.1f} s of CPU "
        f"(read + index + check), peak {peak:,.0f} MB resident"
    )


def reaudit(train_n: int, test_n: int, checks: Checks) -> None:
    import dsreg
    from dsreg.audit.corpus import jpeg, photo_tiles

    tiles = photo_tiles(min(300, train_n + test_n), seed=3, side=96)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        reg = dsreg.init(registry=root / "reg")
        train, test = root / "train", root / "test"
        for i in range(train_n):
            tile = tiles[i % len(tiles)]
            # Each training item its own bytes: a tile at its own JPEG quality and size.
            side = 64 + i % 64
            _put(
                train / f"c{i % 10}" / f"{i:06d}.jpg", jpeg(tile.resize((side, side)), 50 + i % 45)
            )
        for i in range(test_n):
            _put(test / f"c{i % 10}" / f"{i:05d}.jpg", jpeg(tiles[int(rng.integers(len(tiles)))]))
        dsreg.add("train", train, tag="v1", registry=reg)
        dsreg.add("test", test, tag="v1", registry=reg)
        first = _timed(lambda: dsreg.audit_duplicates("test@v1", against="train@v1", registry=reg))
        extra = max(1, train_n // 100)
        for i in range(train_n, train_n + extra):
            _put(train / f"c{i % 10}" / f"{i:06d}.jpg", jpeg(tiles[i % len(tiles)], 97))
        dsreg.add("train", train, tag="v2", registry=reg)
        result = []
        again = _timed(
            lambda: result.append(
                dsreg.audit_duplicates("test@v1", against="train@v2", registry=reg)
            )
        )
        print(
            f"audit of {test_n:,} test images against {train_n:,} training images: {first:.2f} s; "
            f"after adding {extra} ({extra / train_n:.0%}): {again:.2f} s "
            f"({again / first:.1%} of the first), {result[0].fingerprints['computed']} "
            "fingerprints computed"
        )
    checks.check(REAUDIT, 100 * again / first)


def engines(n: int) -> None:
    """The same corpus fingerprinted by the local pool and by Ray Data in local mode."""
    import warnings

    import pyarrow as pa

    from dsreg.audit.corpus import jpeg, photo_tiles, stdlib_texts
    from dsreg.audit.engines import Engine, run_batches
    from dsreg.audit.fingerprints import FILES_SCHEMA, fingerprint_files

    if not _JOBS_GIVEN:
        del os.environ["DSREG_JOBS"]  # the pool's default: a worker per CPU
    tiles = photo_tiles(300, seed=1, side=128)
    texts = stdlib_texts()
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(n):
            path = Path(tmp) / f"{i:06d}"
            # Half images (each its own bytes: its own JPEG quality), half texts.
            data = jpeg(tiles[i % 300], 40 + i % 55) if i % 2 else f"{texts[i % len(texts)]} {i}"
            path.write_bytes(data if isinstance(data, bytes) else data.encode())
            paths.append(str(path))
        inputs = pa.table({"path": paths, "expect": [None] * n}, schema=FILES_SCHEMA)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import ray

            start = time.perf_counter()
            ray.init(include_dashboard=False)
            ray_start = time.perf_counter() - start
        for name in ("local", "ray", "local", "ray"):
            took = _timed(lambda e=name: run_batches(fingerprint_files, inputs, Engine(e)))
            print(f"  {name:6s} {n:,} files in {took:6.2f} s: {n / took:6.0f} files/s")
        cpus = int(ray.cluster_resources().get("CPU", 0))
        print(f"  (Ray's start: {ray_start:.1f} s; {cpus} CPUs; load {os.getloadavg()[0]:.1f})")


def _put(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["rate", "scale", "reaudit", "engines"])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--stored", type=int, default=5_000_000)
    parser.add_argument("--queries", type=int, default=50_000)
    parser.add_argument("--threshold", type=int, default=10)
    parser.add_argument("--crops", type=int, default=16, help="crop hashes per stored image")
    parser.add_argument("--train", type=int, default=5_000)
    parser.add_argument("--test", type=int, default=500)
    args = parser.parse_args()
    checks = Checks(f"bench_audit {args.what}")
    if args.what == "rate":
        rate(args.n)
    elif args.what == "scale":
        if not _JOBS_GIVEN:
            del os.environ["DSREG_JOBS"]  # the join's default: a thread per CPU
        scale(args.stored, args.queries, args.threshold, args.crops, checks)
    elif args.what == "engines":
        engines(args.n)
    else:
        reaudit(args.train, args.test, checks)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
