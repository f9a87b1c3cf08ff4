"""Where a batch function runs over a table of inputs: a local process pool, or Ray Data.

Fingerprinting a corpus is the step of an audit that outgrows one machine, and it is one pure
batch function (``fingerprints.fingerprint_files``: a table of file paths in, a table of
fingerprints out). ``run_batches`` hands that function to an engine:

- ``local`` (the default): the batches run in forked worker processes, one per CPU
  (``_util.parallel.map_chunks``), or in threads when the work is small;
- ``ray``: the batches run as Ray Data ``map_batches`` tasks on the cluster ``ray.init``
  connects to (``ray_address``: ``ray://host:10001`` for a remote cluster, ``auto`` for the
  one this machine belongs to; none starts Ray on this machine, or joins the one
  ``RAY_ADDRESS`` names). Each task reads its files where it runs, so the paths must be
  readable on every node (a shared file system mounted at the same path); the result batches
  stream back to this process, which stores the fingerprints table and runs the matching.

The function and the batches are the same on both engines, so the table is the same: the
engines differ in where the work runs, never in what it computes. Ray is an optional extra
(``pip install 'dsreg[ray]'``), imported only by a run that asks for it. A Ray already
initialised in this process is used as it is; one started here stays up for the next run and
stops with the process.
"""

from __future__ import annotations

import contextlib
import logging
import re
import warnings
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dsreg._util.extras import require
from dsreg._util.parallel import map_chunks
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import InvalidInputError, StorageError

__all__ = ["ENGINES", "Engine", "check_engine", "run_batches"]

ENGINES = ("local", "ray")
# Rows per batch: large enough that a batch's fixed costs (a task, a pipe or object-store
# round trip) vanish next to its fingerprinting, small enough to spread a corpus over a pool.
BATCH_ROWS = 256
# How many times a task whose worker died (killed, out of memory, crashed in a decoder) is run
# again before the audit fails: Ray core's default for a task. Ray Data's own default retries
# without limit, so a file that kills every worker it meets would hang the audit. (A task that
# raises is not run again: its error is the audit's.)
TASK_RETRIES = 3
# Ray's message of a failed task: its terminal colour codes, and where the task's own error
# (its traceback first) ends and Ray's wrapping of it begins.
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
_WRAPPED = "\nThe above exception was the direct cause of the following exception:"
# Local mode: Ray started on this machine without its dashboard (a web server nobody reads).
_LOCAL_INIT: dict[str, Any] = {"include_dashboard": False}


@dataclass(frozen=True, slots=True)
class Engine:
    """How fingerprints are computed: the engine's name (``ENGINES``), the Ray cluster's
    address (``ray`` only; None: local), and who hears of the progress."""

    name: str = "local"
    ray_address: str | None = None
    progress: ProgressHook = no_progress


def check_engine(name: str, ray_address: str | None) -> None:
    """Refuse an unknown engine, a Ray address for the local one, or the Ray engine where Ray
    Data is not installed, before any work."""
    if name not in ENGINES:
        raise InvalidInputError(f"unknown engine {name!r}: use 'local' (the default) or 'ray'")
    if ray_address is not None and name != "ray":
        raise InvalidInputError(
            f"--ray-address {ray_address!r} needs --engine ray (the local engine runs here)"
        )
    if name == "ray":
        _import_ray()


def run_batches(
    fn: Callable[[pa.Table], pa.Table],
    inputs: pa.Table,
    engine: Engine,
    progress: Callable[[int, int], None] | None = None,
) -> list[pa.Table]:
    """``fn`` applied to consecutive batches of ``inputs``, on ``engine``: the result tables,
    in no particular order. ``progress(done, total)`` hears of the input rows done."""
    check_engine(engine.name, engine.ray_address)
    n = inputs.num_rows
    if n == 0:
        return []
    parts = []
    done = 0
    results = _on_ray(fn, inputs, engine.ray_address) if engine.name == "ray" else None
    if results is None:
        results = _on_pool(fn, inputs)
    with contextlib.closing(results):
        for rows, part in results:
            parts.append(part)
            done += rows
            if progress is not None:
                progress(done, n)
    return parts


def _on_pool(
    fn: Callable[[pa.Table], pa.Table], inputs: pa.Table
) -> Generator[tuple[int, pa.Table], None, None]:
    def work(lo: int, hi: int) -> pa.Table:
        return fn(inputs.slice(lo, hi - lo))

    chunks = map_chunks(work, inputs.num_rows, chunk=BATCH_ROWS, threshold=4 * BATCH_ROWS)
    with contextlib.closing(chunks):
        for lo, part in chunks:
            yield min(BATCH_ROWS, inputs.num_rows - lo), part


def _import_ray() -> Any:
    """The ``ray`` module with Ray Data, or the one-line error naming the extra to install."""
    require(
        "ray",
        "dsreg audit duplicates --engine ray",
        python="dsreg.audit_duplicates(engine='ray')",
    )
    with _quiet_ray():
        import ray
        import ray.data
    return ray


@contextlib.contextmanager
def _quiet_ray() -> Iterator[None]:
    """Ray's own deprecation warnings (raised inside Ray, about Ray's settings) kept off the
    caller's terminal, for one call into Ray (never across a ``yield``: the caller's code runs
    with its own filters)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"ray(\.|$)")
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"ray(\.|$)")
        # Ray 2.60 on deprecates ``map_batches``' free remote arguments, and names none for a
        # task's retries (``TASK_RETRIES``), which it still takes as one.
        warnings.filterwarnings(
            "ignore", message="`ray_remote_args` is deprecated", category=DeprecationWarning
        )
        yield


def _connect(ray: Any, address: str | None) -> None:
    if ray.is_initialized():
        return
    extra = _LOCAL_INIT if address is None else {}
    try:
        ray.init(address=address, ignore_reinit_error=True, logging_level=logging.WARNING, **extra)
    # Ray's core exits the process (SystemExit) when it finds no cluster at an address.
    except (ConnectionError, TimeoutError, ValueError, RuntimeError, SystemExit) as e:
        where = address or "this machine"
        why = "no cluster answered" if isinstance(e, SystemExit) else " ".join(str(e).split())
        raise InvalidInputError(
            f"cannot start or reach Ray at {where}: {why}; start a cluster with `ray start "
            "--head` and pass --ray-address ray://HOST:10001"
        ) from None


def _on_ray(
    fn: Callable[[pa.Table], pa.Table], inputs: pa.Table, address: str | None
) -> Generator[tuple[int, pa.Table], None, None]:
    """The batches as Ray Data tasks: the inputs cut into blocks of ``BATCH_ROWS`` rows (so the
    cluster runs as many tasks side by side as it has CPUs), ``fn`` mapped over each block as a
    PyArrow table, the results streamed back here."""
    ray = _import_ray()
    with _quiet_ray():
        _connect(ray, address)
        # Ray Data logs each execution's plan and timing at INFO, and a failed task at ERROR
        # (over several lines, which the one-line error below says): neither on the terminal.
        logging.getLogger("ray.data").setLevel(logging.CRITICAL)
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        blocks = [inputs.slice(lo, BATCH_ROWS) for lo in range(0, inputs.num_rows, BATCH_ROWS)]
        dataset = ray.data.from_arrow(blocks).map_batches(
            _counted(fn),
            batch_format="pyarrow",
            batch_size=None,
            zero_copy_batch=True,
            max_retries=TASK_RETRIES,
        )
        batches = iter(dataset.iter_batches(batch_format="pyarrow", batch_size=None))
    while True:
        try:
            with _quiet_ray():
                batch = next(batches, None)
        except ray.exceptions.RayError as e:
            # A task that failed after Ray's retries: its error, without Ray's traceback.
            raise StorageError(f"a Ray task failed: {_reason(e)}") from None
        if batch is None:
            return
        yield sum(batch.column("_inputs").to_pylist()), batch.drop_columns(["_inputs"])


def _reason(error: Exception) -> str:
    """Why a Ray task failed, in one line: the task's own error as its traceback ends
    (``OSError: ...``), which Ray's message holds first, before its own wrapping of it
    (``UserCodeException: UDF failed to process a data block``) and its colour codes; else
    the first line of Ray's message, after the error's kind (a worker that died)."""
    text = _COLOUR.sub("", str(error))
    own = text.split(_WRAPPED)[0].splitlines()
    said = [line for line in own if line.strip() and not line[0].isspace()]
    ends = [line for line in said if not line.startswith(("ray::", "Traceback"))]
    if ends:
        return ends[-1].strip()
    return f"{type(error).__name__}: {said[0].strip() if said else 'no message'}"


def _counted(fn: Callable[[pa.Table], pa.Table]) -> Callable[[pa.Table], pa.Table]:
    """``fn`` with a column saying, on a result batch's first row, how many input rows it
    answers (Ray may split or merge result batches on the way back)."""

    def batch(table: pa.Table) -> pa.Table:
        out = fn(table)
        count = [0] * out.num_rows
        if count:
            count[0] = table.num_rows
        return out.append_column("_inputs", pa.array(count, pa.int64()))

    return batch
