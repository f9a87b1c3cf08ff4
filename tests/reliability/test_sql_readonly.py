"""SQL is read-only unless asked (docs/concepts.md, "Guarantees": a query reads revisions and
nothing else; docs/queries.md, "Read-only by default").

Every way dsreg runs a user's SQL (``dsreg.sql``, ``dsreg sql``, ``dsreg.connect()``,
``Dataset.sql``) refuses a list of hostile statements (a COPY over a tag, files read outside the
registry, ATTACH, INSTALL/LOAD, SET, PRAGMA, secrets, EXPORT, URLs, writes through the views'
own ``dsreg://`` files), each in several disguises, with a ``QueryError`` (CLI: exit 1,
``Error: …``) that says SQL is read-only and names ``--allow-files``; the registry and the
folder beside it are byte for byte as before. The queries of docs/queries.md still run, and with
``allow_files`` the user's own Parquet file is read. Metadata columns named like the views'
columns or internals cannot change what a view serves, and ``dsreg add`` refuses them.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg import Registry
from dsreg.errors import CorruptObjectError, DatasetFormatError, DsregError, QueryError
from dsreg.formats.corrections import corrections_table
from dsreg.formats.manifests import VIEWS, Revision, Snapshot
from dsreg.formats.tables import RESERVED, RESERVED_PREFIX, base_schema, parquet_bytes
from dsreg.overlays.write import write_overlay
from dsreg.registry.reader import LocalReader
from dsreg.views.dataset import Dataset

N = 12
LABELS = np.asarray([i % 3 for i in range(N)], dtype=np.int32)
CLASSES = ("ant", "bee", "cat")
PRODUCER = {"name": "test", "version": "1", "params": {}, "inputs": {}}
# Five raters each: rows 0-2 correctable to the next class, rows 3-4 neither, row 5 no error.
VOTES = """example_id,given_label,suggested_label,given,guessed,both,neither
e00,ant,bee,0,5,0,0
e01,bee,cat,0,5,0,0
e02,cat,ant,0,5,0,0
e03,ant,,0,0,0,5
e04,bee,,0,0,0,5
e05,cat,,5,0,0,0
"""


@dataclass(frozen=True)
class Setup:
    reg: Registry
    outside: Path  # a folder beside the registry: the user's files, and where writes would land
    examples: str  # the digest of toy's examples table (a dsreg:// file the views read)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    """``toy`` (12 rows, 3 classes, a metadata column) at original, cleaned-v1, corrected-v1;
    a folder ``outside`` holding a secret in several formats and the user's own Parquet file."""
    root = tmp_path_factory.mktemp("readonly")
    reg = dsreg.init(registry=root / "reg")
    sources = root / "sources"
    sources.mkdir()
    table = sources / "toy.parquet"
    pq.write_table(
        pa.table(
            {
                "example_id": [f"e{i:02d}" for i in range(N)],
                "label": LABELS,
                "split": ["train", "test"] * (N // 2),
            }
        ),
        table,
    )
    dsreg.add("toy", table=table, classes=CLASSES, tag="original", registry=reg)
    (sources / "votes.csv").write_text(VOTES)
    ov = dsreg.import_votes(
        "toy@original",
        sources / "votes.csv",
        format="csv",
        tag="cleaned-v1",
        view="cleaned",
        registry=reg,
    )
    dsreg.tag(
        "toy@corrected-v1", "toy@original", overlays=[ov.digest], view="corrected", registry=reg
    )
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the secret\n")
    (outside / "secret.csv").write_text("k,v\nsecret,42\n")
    (outside / "secret.json").write_text('{"secret": 42}\n')
    pq.write_table(pa.table({"row": [0, 1, 2], "pred": [1, 2, 0]}), outside / "preds.parquet")
    examples = reg.snapshot(LocalReader(reg).revision("toy@original").revision.snapshot).examples
    return Setup(reg=reg, outside=outside, examples=examples)


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Callable[[], Registry]]:
    """``fresh()``: a new empty registry under tmp_path (one per hypothesis example)."""
    made = iter(range(1_000_000))

    def make() -> Registry:
        return dsreg.init(registry=tmp_path / f"reg{next(made)}")

    yield make


def state(root: Path) -> dict[str, tuple[int, str]]:
    """Every file and folder under ``root``: mode and content hash."""
    out: dict[str, tuple[int, str]] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs:
            p = Path(dirpath, name)
            out[p.relative_to(root).as_posix() + "/"] = (p.lstat().st_mode, "")
        for name in files:
            p = Path(dirpath, name)
            out[p.relative_to(root).as_posix()] = (
                p.lstat().st_mode,
                hashlib.sha256(p.read_bytes()).hexdigest(),
            )
    return out


def run_cli(*args: str) -> tuple[int, str, str]:
    """``dsreg ARGS`` in this process: exit status, stdout, stderr."""
    from dsreg.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    argv = sys.argv
    sys.argv = ["dsreg", *args]
    try:
        with redirect_stdout(out), redirect_stderr(err):
            main(list(args))
    except SystemExit as e:
        code = int(e.code or 0)
    finally:
        sys.argv = argv
    return code, out.getvalue(), err.getvalue()


# -- hostile statements -------------------------------------------------------------------------

# {reg}: the registry, {out}: the folder beside it, {obj}: the examples table's dsreg:// name,
# {store}: its path in the store. Each must be refused with the registry and {out} unchanged.
HOSTILE = (
    # writes: a tag rewritten behind --force and the log, files made or replaced
    "COPY (SELECT 'blake3:' || repeat('0', 64)) TO '{reg}/refs/toy/original' (HEADER false)",
    "COPY (SELECT 1 AS a) TO '{reg}/refs/toy/stolen' (FORMAT csv)",
    "COPY (SELECT * FROM \"toy@original\") TO '{out}/leak.csv'",
    "COPY (SELECT 1 AS a) TO '{store}' (FORMAT parquet, USE_TMP_FILE false)",
    "COPY (SELECT 1 AS a) TO '{obj}' (FORMAT csv)",
    "COPY (SELECT 1 AS a) TO '{obj}' (FORMAT parquet, USE_TMP_FILE false)",
    "COPY (SELECT 1 AS a) TO 'dsreg://blake3/new' (FORMAT csv)",
    "EXPORT DATABASE '{out}/export'",
    "EXPORT DATABASE 'dsreg://blake3/export'",
    # reads outside the registry, and of the store by path
    "SELECT * FROM read_csv('{out}/secret.csv')",
    "SELECT * FROM read_csv('/etc/passwd', sep = ':')",
    "SELECT * FROM read_text('{out}/secret.txt')",
    "SELECT * FROM read_blob('{out}/secret.txt')",
    "SELECT * FROM read_json('{out}/secret.json')",
    "SELECT * FROM read_parquet('{out}/preds.parquet')",
    "SELECT * FROM '{out}/preds.parquet'",
    "SELECT * FROM read_parquet('{store}')",
    "SELECT * FROM read_text('{reg}/refs/toy/original')",
    "SELECT * FROM glob('{out}/*')",
    "SELECT * FROM glob('/*')",
    "SELECT * FROM sniff_csv('{out}/secret.csv')",
    "SELECT * FROM parquet_metadata('{out}/preds.parquet')",
    "CREATE TEMP TABLE IF NOT EXISTS t (k VARCHAR, v INTEGER); COPY t FROM '{out}/secret.csv'",
    "CREATE TABLE stolen AS SELECT * FROM read_csv('{out}/secret.csv')",
    "CREATE VIEW stolen AS SELECT * FROM read_text('{out}/secret.txt')",
    "IMPORT DATABASE '{out}'",
    # databases, extensions, the network
    "ATTACH '{out}/new.duckdb' AS other",
    "ATTACH '{reg}/refs/toy/original' AS other",
    "INSTALL httpfs",
    "LOAD httpfs",
    "LOAD '{out}/evil.duckdb_extension'",
    "SELECT * FROM read_parquet('https://example.com/data.parquet')",
    "SELECT * FROM 's3://bucket/data.parquet'",
    "SELECT * FROM read_csv('http://127.0.0.1:9/x.csv')",
    "CREATE SECRET (TYPE s3, KEY_ID 'key', SECRET 'secret')",
    "CREATE PERSISTENT SECRET keep (TYPE s3, KEY_ID 'key', SECRET 'secret')",
    # settings: turning access back on, or any other
    "SET enable_external_access = true",
    "RESET enable_external_access",
    "SET lock_configuration = false",
    "SET allowed_directories = ['/']",
    "SET allowed_paths = ['{out}/secret.txt']",
    "SET threads = 1",
    "SET profiling_output = '{out}/profile.json'",
    "PRAGMA enable_profiling",
    "PRAGMA threads = 1",
    "CALL enable_logging(storage = 'file', storage_config = {{'path': '{out}/log'}})",
)

# Ways to hide a statement: as is, after a comment, after a harmless statement, after a query of
# a revision (whose names dsreg resolves first), with trailing noise.
DISGUISES: tuple[Callable[[str], str], ...] = (
    lambda q: q,
    lambda q: f"/* a comment */ {q}",
    lambda q: f"\n  -- a line comment\n{q};",
    lambda q: f"SELECT 1; {q}",
    lambda q: f'SELECT count(*) FROM "toy@cleaned-v1"; {q}',
    lambda q: f"{q} ;  ",
)


def hostile(setup: Setup, template: str) -> str:
    store = setup.reg.store.path(setup.examples)
    algorithm, _, hexdigest = setup.examples.partition(":")
    return template.format(
        reg=setup.reg.root, out=setup.outside, store=store, obj=f"dsreg://{algorithm}/{hexdigest}"
    )


def assert_read_only_message(message: str) -> None:
    assert "read-only" in message and "--allow-files" in message, message


def refused_by(entry: str, setup: Setup, query: str) -> None:
    """Run ``query`` through ``entry``; it must be refused as read-only SQL."""
    reg = setup.reg
    if entry == "cli":
        code, stdout, stderr = run_cli("sql", query, "--registry", str(reg.root))
        assert code == 1 and stderr.startswith("Error: "), (code, stdout, stderr)
        assert_read_only_message(stderr)
        assert "secret" not in stdout
        return
    with pytest.raises(QueryError) as info:
        if entry == "dsreg.sql":
            dsreg.sql(query, registry=reg)
        elif entry == "dsreg.sql output":
            dsreg.sql(query, output=io.StringIO(), format="csv", registry=reg)
        elif entry == "connect.execute":
            with dsreg.connect(reg) as con:
                con.execute(query).fetchall()
        elif entry == "connect.table":
            with dsreg.connect(reg) as con:
                con.table(query)
        elif entry == "Dataset.sql":
            dsreg.open("toy@corrected-v1", registry=reg).sql(query)
        else:  # pragma: no cover
            raise AssertionError(entry)
    assert_read_only_message(str(info.value))


ENTRIES = (
    "dsreg.sql",
    "dsreg.sql output",
    "cli",
    "connect.execute",
    "connect.table",
    "Dataset.sql",
)


def test_every_hostile_statement_is_refused_and_changes_nothing(setup: Setup) -> None:
    before, beside = state(setup.reg.root), state(setup.outside)
    with dsreg.connect(setup.reg) as con:
        for template in HOSTILE:
            query = hostile(setup, template)
            with pytest.raises(QueryError) as info:
                con.execute(query).fetchall()
            assert_read_only_message(str(info.value))
            # The connection stays usable: a refusal is one statement's.
            got = con.execute('SELECT count(*) FROM "toy@cleaned-v1"').fetchall()
            assert got == [(N - 5,)]
    assert state(setup.reg.root) == before and state(setup.outside) == beside


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    template=st.sampled_from(HOSTILE),
    disguise=st.sampled_from(DISGUISES),
    entry=st.sampled_from(ENTRIES),
)
def test_hostile_statements_are_refused_through_every_entry_point(
    setup: Setup, template: str, disguise: Callable[[str], str], entry: str
) -> None:
    before, beside = state(setup.reg.root), state(setup.outside)
    refused_by(entry, setup, disguise(hostile(setup, template)))
    assert state(setup.reg.root) == before, "the registry changed"
    assert state(setup.outside) == beside, "a file was written beside the registry"


def test_the_views_own_files_serve_only_their_tables(setup: Setup) -> None:
    """dsreg:// lists nothing and serves only the tables this connection's views read."""
    with dsreg.connect(setup.reg) as con:
        con.execute('SELECT count(*) FROM "toy@original"').fetchall()
        assert con.execute("SELECT count(*) FROM glob('dsreg://*')").fetchall() == [(0,)]
        assert con.execute("SELECT count(*) FROM glob('dsreg://**')").fetchall() == [(0,)]
        for path in ("dsreg://../../etc/passwd", "dsreg:///etc/passwd", "dsreg://blake3/x"):
            with pytest.raises(DsregError):
                con.execute(f"SELECT * FROM read_csv('{path}')").fetchall()
        algorithm, _, hexdigest = setup.examples.partition(":")
        size = con.execute(
            f"SELECT size FROM read_blob('dsreg://{algorithm}/{hexdigest}')"
        ).fetchall()
        assert size == [(setup.reg.store.path(setup.examples).stat().st_size,)]


def test_a_table_changed_under_a_kept_view_is_not_served(
    fresh: Callable[[], Registry], tmp_path: Path
) -> None:
    reg = fresh()
    source = tmp_path / "t.parquet"
    pq.write_table(pa.table({"example_id": ["a", "b", "c"], "label": [0, 1, 0]}), source)
    dsreg.add("t", table=source, tag="original", registry=reg)
    examples = reg.store.path(
        reg.snapshot(LocalReader(reg).revision("t@original").revision.snapshot).examples
    )
    with dsreg.connect(reg) as con:
        con.create_view("kept", "t@original")
        assert con.execute("SELECT count(*) FROM kept").fetchall() == [(3,)]
        data = bytearray(examples.read_bytes())
        data[len(data) // 2] ^= 0xFF
        examples.chmod(0o644)
        examples.write_bytes(bytes(data))
        with pytest.raises(CorruptObjectError):
            con.execute("SELECT count(*) FROM kept").fetchall()


# -- what still works ---------------------------------------------------------------------------


def test_the_queries_of_the_docs_still_run(setup: Setup) -> None:
    reg = setup.reg
    before = state(reg.root)
    got = dsreg.sql(
        'SELECT label_name, count(*) AS n FROM "toy@cleaned-v1" GROUP BY ALL ORDER BY 2 DESC, 1',
        registry=reg,
    )
    assert got.to_pylist() == [
        {"label_name": "cat", "n": 3},
        {"label_name": "ant", "n": 2},
        {"label_name": "bee", "n": 2},
    ]
    ds = dsreg.open("toy@cleaned-v1", registry=reg)
    assert ds.sql("SELECT count(*) AS n FROM this").to_pylist() == [{"n": N - 5}]
    with dsreg.connect(reg) as con:
        joined = con.sql(
            'SELECT count(*) FROM "toy@original" o JOIN "toy@corrected-v1" c USING (row)'
        ).fetchall()
        assert joined == [(N - 2,)]
        con.execute('SELECT example_id FROM "toy@original" WHERE "row" = ?', [3])
        assert con.fetchall() == [("e03",)]
        con.create_view("mine", "toy@corrected-v1", view="honeypot")
        assert con.execute("SELECT count(*) FROM mine").fetchall() == [(3,)]
        # Temporary tables, macros and in-memory databases stay the user's to make.
        con.execute('CREATE TEMP TABLE kept AS SELECT * FROM "toy@original"')
        con.execute("CREATE MACRO twice(x) AS 2 * x")
        assert con.execute("SELECT twice(count(*)) FROM kept").fetchall() == [(2 * N,)]
        con.execute("ATTACH ':memory:' AS scratch")
        schema, batches = con.batches('SELECT * FROM "toy@original"', rows=5)
        assert sum(len(b) for b in batches) == N and "split" in schema.names
    out = io.StringIO()
    assert dsreg.sql('SELECT * FROM "toy@original"', output=out, format="csv", registry=reg) == N
    code, stdout, _ = run_cli(
        "sql", 'SELECT count(*) AS n FROM "toy@original"', "--registry", str(reg.root), "--json"
    )
    assert code == 0 and '"n": 12' in stdout
    assert state(reg.root) == before


def test_with_allow_files_the_users_own_files_are_read(setup: Setup) -> None:
    reg, preds = setup.reg, setup.outside / "preds.parquet"
    query = (
        f"SELECT o.example_id, p.pred FROM \"toy@original\" o JOIN read_parquet('{preds}') p "
        'USING ("row") ORDER BY "row"'
    )
    want = [("e00", 1), ("e01", 2), ("e02", 0)]
    got = dsreg.sql(query, allow_files=True, registry=reg)
    assert [tuple(r.values()) for r in got.to_pylist()] == want
    with dsreg.connect(reg, allow_files=True) as con:
        assert con.execute(query).fetchall() == want
        # Full power: the user may write their own files (not the registry's tables).
        con.execute(f"COPY (SELECT 1 AS a) TO '{setup.outside}/mine.csv'")
        assert (setup.outside / "mine.csv").read_text().split() == ["a", "1"]
        (setup.outside / "mine.csv").unlink()
        algorithm, _, hexdigest = setup.examples.partition(":")
        with pytest.raises(QueryError, match="read-only"):
            con.execute(f"COPY (SELECT 1 AS a) TO 'dsreg://{algorithm}/{hexdigest}' (FORMAT csv)")
    ds = dsreg.open("toy@original", registry=reg)
    assert ds.sql(f"SELECT count(*) AS n FROM '{preds}'", allow_files=True).to_pylist() == [
        {"n": 3}
    ]
    code, stdout, stderr = run_cli(
        "sql", query, "--allow-files", "--format", "csv", "--registry", str(reg.root)
    )
    assert code == 0, stderr
    assert list(csv.reader(io.StringIO(stdout))) == [
        ["example_id", "pred"],
        ["e00", "1"],
        ["e01", "2"],
        ["e02", "0"],
    ]


# -- metadata columns named like the views' own ---------------------------------------------------

# Names a view serves or uses inside, in the cases a source might spell them.
TAKEN = (
    "__dsreg_v",
    "__dsreg_s",
    "__dsreg_given",
    "__DSREG_V",
    "__dsreg_e",
    "__dsreg_c0",
    "row",
    "Row",
    "label_name",
    "given_label",
    "verdict",
    "VERDICT",
    "suggested_label",
    "score",
    "Label",
    "SIZE",
    "Example_Id",
)


def _hostile_column(name: str, n: int) -> pa.Array:
    """Values chosen to mislead a view that read the column in place of its own."""
    low = name.lower()
    if low in ("__dsreg_v", "verdict"):
        return pa.array(["correctable"] * n)
    if low in ("__dsreg_s", "__dsreg_given", "label", "given_label", "suggested_label"):
        return pa.array([2] * n, pa.int32())
    if low in ("row", "size", "score"):
        return pa.array(list(reversed(range(n))), pa.int64())
    if low == "__dsreg_e":  # a struct whose fields are the view's own columns
        return pa.array([{"label": 2, "file_row_number": 0, "example_id": "x"}] * n)
    return pa.array([f"x{i}" for i in range(n)])


def _plant(reg: Registry, dataset: str, labels: np.ndarray, extra: list[tuple[int, str]]) -> str:
    """An examples table stored as other code could (add would refuse it): the fixed columns,
    ``split``, and each ``(position, name)`` of ``extra`` inserted after the fixed ones. Tags
    ``<dataset>@x``; returns the snapshot digest."""
    n = len(labels)
    table = pa.Table.from_arrays(
        [
            pa.array([f"x{i}" for i in range(n)], pa.string()),
            pa.array(labels, pa.int32()),
            pa.array([None] * n, pa.string()),
            pa.array([None] * n, pa.int64()),
        ],
        schema=base_schema(),
    ).append_column("split", pa.array([f"s{i % 2}" for i in range(n)]))
    for position, name in extra:
        at = 4 + min(position, table.num_columns - 4)
        table = table.add_column(at, name, _hostile_column(name, n))
    examples = reg.store.put_bytes(parquet_bytes(table))
    snap = Snapshot(
        dataset=dataset, examples=examples, rows=n, classes=CLASSES, source={"kind": "table"}
    )
    snap_digest = reg.put_manifest(snap)
    reg.refs.set(dataset, "x", reg.put_manifest(Revision(snapshot=snap_digest)), command="test")
    return snap_digest


def _tag_views(reg: Registry, dataset: str, snapshot: str, labels: np.ndarray) -> None:
    rows = np.asarray([1, 3, 4, 6], dtype=np.int64)
    ov = write_overlay(
        reg,
        base=snapshot,
        kind="manual",
        table=corrections_table(
            rows=rows,
            example_ids=[f"x{i}" for i in rows],
            given_label=labels[rows],
            suggested_label=np.asarray([2, -1, 0, 1], dtype=np.int64),
            verdict=["correctable", "multi_label", "non_error", "suspected"],
        ),
        producer=PRODUCER,
    )
    for view in VIEWS:
        dsreg.tag(f"{dataset}@{view}", f"{dataset}@x", overlays=[ov], view=view, registry=reg)


def _served(reg: Registry, spec: str) -> tuple[pa.Table, pa.Table]:
    sql = dsreg.sql(f'SELECT * FROM "{spec}" ORDER BY "row"', registry=reg)
    return sql, Dataset(LocalReader(reg).revision(spec)).labels(review=True)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    extra=st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(TAKEN)),
        min_size=1,
        max_size=5,
        unique_by=lambda t: t[1].lower(),
    ),
    labels=st.lists(st.integers(0, 2), min_size=8, max_size=8),
)
def test_columns_named_like_the_views_own_change_nothing_served(
    fresh: Callable[[], Registry], extra: list[tuple[int, str]], labels: list[int]
) -> None:
    reg = fresh()
    arr = np.asarray(labels, dtype=np.int32)
    _tag_views(reg, "clean", _plant(reg, "clean", arr, []), arr)
    _tag_views(reg, "evil", _plant(reg, "evil", arr, extra), arr)
    for view in VIEWS:
        clean_sql, clean_rule = _served(reg, f"clean@{view}")
        evil_sql, evil_rule = _served(reg, f"evil@{view}")
        assert clean_sql.column_names[-1] == "split"
        assert evil_sql.equals(clean_sql), view
        assert evil_rule.equals(clean_rule), view
        assert evil_rule.cast(evil_sql.schema).equals(evil_sql), view


def test_a_legacy_file_row_number_column_is_a_clear_error(
    fresh: Callable[[], Registry],
) -> None:
    reg = fresh()
    labels = np.asarray([0, 1, 2, 0], dtype=np.int32)
    _plant(reg, "old", labels, [(0, "file_row_number")])
    with pytest.raises(QueryError, match="file_row_number"):
        dsreg.sql('SELECT * FROM "old@x"', registry=reg)
    assert Dataset(LocalReader(reg).revision("old@x")).labels().column("label").to_pylist() == [
        0,
        1,
        2,
        0,
    ]


def _case(draw: st.DrawFn, name: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
    return "".join(c.upper() if f else c for c, f in zip(name, flips, strict=True))


@st.composite
def taken_names(draw: st.DrawFn) -> list[str]:
    """Metadata columns add must refuse: a reserved name or one starting with the reserved
    prefix (in any case), or two names SQL takes for one."""
    kind = draw(st.sampled_from(["reserved", "prefix", "twins"]))
    if kind == "reserved":
        return [
            "ok",
            _case(draw, draw(st.sampled_from(sorted(RESERVED - {"example_id", "label"})))),
        ]
    if kind == "prefix":
        suffix = draw(st.text("abcdefgz_0123456789", max_size=8))
        return [_case(draw, RESERVED_PREFIX + suffix), "ok"]
    name = draw(st.text("abcdefgz", min_size=1, max_size=6))
    return [name, name.upper() if name.upper() != name else name.lower()]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(names=taken_names())
def test_add_refuses_metadata_columns_named_like_the_views_own(
    tmp_path: Path, names: list[str]
) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    source = tmp_path / "source.parquet"
    columns: dict[str, list[object]] = {"example_id": ["a", "b"], "label": [0, 1]}
    for name in names:
        columns[name] = ["v", "w"]
    pq.write_table(pa.table(columns), source)
    before = state(reg.root)
    with pytest.raises(DatasetFormatError) as info:
        dsreg.add("named", table=source, tag="original", registry=reg)
    message = str(info.value)
    assert any(repr(n) in message for n in names if n != "ok"), message
    assert "rename" in message
    assert state(reg.root) == before
