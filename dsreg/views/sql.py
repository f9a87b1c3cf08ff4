"""Revisions as DuckDB views over the stored Parquet objects (docs/queries.md, "How a view is
built").

A revision's view reads its snapshot's examples table with ``file_row_number`` (the row's
position, no hash needed to find it) and left-joins each overlay's corrections table on that
integer ``row``: the corrections are sorted by ``row`` and are a tenth of the rows or fewer, so
DuckDB builds its join table on them and streams the examples past it, in order.

This is the view rule in SQL, one of three implementations side by side: ``dsreg.views.rule``
(numpy, the reference, what ``Dataset`` serves) and ``dsreg.views.sparse`` (the rows overlays
name only, for ``eval`` and ``diff``) are the others; ``tests/views/test_rule_parity.py`` holds
the three equal. Nothing here knows ``Dataset``: ``Dataset.sql`` calls ``query_revision``.

Every Parquet object is hashed before DuckDB may read it, once per process per object
(``dsreg.views.verified``): a corrupt object raises ``CorruptObjectError`` and is never served.

In SQL a revision is a quoted identifier: ``SELECT label, count(*) FROM "imagenet-val@cleaned-v2"
GROUP BY ALL``. ``Connection`` scans each query for double-quoted identifiers that hold ``@`` or
start with ``blake3:``, resolves each, and creates a temporary view of exactly that name.

A ``Connection`` is read-only unless made with ``allow_files=True``: its views read the tables
through ``dsreg.views.readonly.ObjectFiles`` (``dsreg://``), and DuckDB may reach nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from dsreg.errors import (
    DsregError,
    InvalidInputError,
    InvalidNameError,
    InvalidSpecError,
    QueryError,
    StorageError,
)
from dsreg.formats.corrections import COUNT_FIELDS, LABEL_SET_VERSIONS
from dsreg.formats.manifests import VIEWS, Revision, Snapshot, View
from dsreg.formats.tables import fold_case, served_metadata
from dsreg.objects.digest import PREFIX
from dsreg.registry.folder import Registry
from dsreg.registry.reader import Reader
from dsreg.views.rule import carried
from dsreg.views.verified import verified_object

if TYPE_CHECKING:
    import duckdb

    from dsreg.views.readonly import ObjectFiles

__all__ = [
    "Connection",
    "query_revision",
    "quoted_names",
    "view_sql",
]


# -- SQL of a view ----------------------------------------------------------------------------


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def view_sql(
    reg: Registry,
    revision: Revision,
    *,
    view: View | None = None,
    locate: Callable[[str], str] | None = None,
) -> str:
    """The ``SELECT`` that serves ``revision`` (in ``view``, default the revision's own).

    Columns: row, example_id, label, label_name, given_label, verdict, blob, size,
    suggested_label, suggested_label_name, score, votes_<field> (one per ``COUNT_FIELDS``),
    labels (the multilabel view; any view whose overlays carry label sets), label_counts (when
    they carry raters' counts: one per class), then the snapshot's metadata columns
    (``served_metadata``: none named like a view column or an internal one). The objects it
    reads are verified first; ``locate`` says what DuckDB reads for a table's digest (default:
    its path in the store, for any DuckDB).
    """
    chosen: View = view if view is not None else revision.view
    if chosen not in VIEWS:
        raise InvalidInputError(f"unknown view {chosen!r}; choose one of {', '.join(VIEWS)}")
    tables = _verified_tables(reg, revision, locate)
    inner = _rows_with_corrections(tables, multilabel=chosen == "multilabel")
    return _served(chosen, tables, inner)


@dataclass(frozen=True, slots=True)
class _CorrectionsTable:
    """One overlay's corrections table, as DuckDB reads it, and its layout version."""

    location: str
    version: int


@dataclass(frozen=True, slots=True)
class _ViewTables:
    """The verified tables a view reads: the snapshot's examples and each overlay's
    corrections (in order), with the metadata columns the examples table serves."""

    snapshot: Snapshot
    examples: str
    corrections: list[_CorrectionsTable]
    metadata: list[str]
    rated: tuple[str, ...]  # the label sets and counts some overlay holds (rule.carried)


def _verified_tables(
    reg: Registry, revision: Revision, locate: Callable[[str], str] | None
) -> _ViewTables:
    snap = reg.snapshot(revision.snapshot)
    examples = verified_object(reg, snap.examples)
    overlays = [reg.overlay(d) for d in revision.overlays]
    paths = [verified_object(reg, ov.corrections) for ov in overlays]
    try:
        names = pq.read_schema(examples).names
    except (pa.ArrowException, OSError) as e:
        raise StorageError(f"cannot read the examples table {examples}: {e}") from e
    if any(fold_case(n) == "file_row_number" for n in names):
        # A table made before the name was reserved: DuckDB numbers rows under that name.
        raise QueryError(
            f"the examples table of {snap.dataset} ({snap.examples}) has a column named "
            "'file_row_number', the name DuckDB gives row positions, so SQL cannot serve it; "
            "read it with dsreg.open(...).labels()"
        )
    if locate is not None:
        examples_at = locate(snap.examples)
        corrections_at = [locate(ov.corrections) for ov in overlays]
    else:
        examples_at, corrections_at = str(examples), [str(p) for p in paths]
    corrections = [
        _CorrectionsTable(location=at, version=ov.version)
        for at, ov in zip(corrections_at, overlays, strict=True)
    ]
    try:  # a version 2 or 4 table's lists, to tell whether the revision carries any (small)
        v2 = [p for p, ov in zip(paths, overlays, strict=True) if ov.version in LABEL_SET_VERSIONS]
        lists = [pq.read_table(p, columns=["labels", "label_counts"]) for p in v2]
    except (pa.ArrowException, OSError) as e:
        raise StorageError(f"cannot read a corrections table of {snap.dataset}: {e}") from e
    return _ViewTables(snap, examples_at, corrections, served_metadata(names), carried(lists))


# Every name of dsreg's own starts with RESERVED_PREFIX, which no served metadata column's does
# (nor is any named like a view column): a column "given" or "e" stays its own.
_EX, _CO = "__dsreg_e", "__dsreg_c"


def _rows_with_corrections(tables: _ViewTables, *, multilabel: bool) -> str:
    """Every row of the examples table, left-joined to each corrections table on its position,
    with the correction that applies to it (the latest overlay's naming it) beside it."""
    # The label sets (the multilabel view, or carried) and counts (carried) are read too; a
    # table without them (version 1 or 3) gives NULL. Counts come dense, one per class.
    sets = [table.version in LABEL_SET_VERSIONS for table in tables.corrections]
    lists = multilabel or "labels" in tables.rated
    counts = "label_counts" in tables.rated
    joins = []
    for i, table in enumerate(tables.corrections):
        extra = ""
        if lists:
            extra += ", labels" if sets[i] else ", NULL::INTEGER[] AS labels"
        if counts:
            dense = _dense_counts(len(tables.snapshot.classes)) if sets[i] else "NULL"
            extra += f", CAST({dense} AS INTEGER[]) AS label_counts"
        src = (
            f'SELECT "row", verdict, suggested_label, score, votes{extra} '
            f"FROM read_parquet({_lit(table.location)})"
        )
        joins.append(f'LEFT JOIN ({src}) AS {_CO}{i} ON {_CO}{i}."row" = {_EX}.file_row_number')
    count = len(tables.corrections)
    if count:
        verdict, suggested = _latest("verdict", count), _latest("suggested_label", count)
        score, votes = _latest("score", count), _latest("votes", count)
        lists_at = _latest("labels", count) if lists else ""
        counts_at = _latest("label_counts", count) if counts else ""
    else:
        verdict, suggested, counts_at = "NULL::VARCHAR", "NULL::INTEGER", ""
        lists_at, score = "NULL::INTEGER[]", "NULL::DOUBLE"
        votes = "NULL::STRUCT(" + ", ".join(f"{_ident(f)} INTEGER" for f in COUNT_FIELDS) + ")"
    rated = f", {lists_at} AS __dsreg_l" * lists + f", {counts_at} AS __dsreg_lc" * counts
    return (
        f'SELECT {_EX}.file_row_number AS "row", {_EX}.example_id, '
        f"{_EX}.label AS __dsreg_given, {_EX}.blob, {_EX}.size"
        + "".join(f", {_EX}.{_ident(m)}" for m in tables.metadata)
        + f", {verdict} AS __dsreg_v, {suggested} AS __dsreg_s, {score} AS __dsreg_score"
        f", {votes} AS __dsreg_votes{rated} "
        f"FROM read_parquet({_lit(tables.examples)}, file_row_number = true) AS {_EX} "
        + " ".join(joins)
    )


def _dense_counts(k: int) -> str:
    """A row's stored ``label_counts`` (``{label, count}`` per class counted) as ``k`` counts in
    class order, 0 for a class nobody chose; NULL stays NULL (``rule.dense_counts``)."""
    return (
        f"CASE WHEN label_counts IS NULL THEN NULL ELSE list_transform(range({k}), lambda c: "
        "coalesce(list_sum(list_transform(list_filter(label_counts, lambda x: x.label = c), "
        "lambda x: struct_extract(x, 'count'))), 0)) END"
    )


def _latest(field: str, count: int) -> str:
    """``field`` of the correction that applies: overlays apply in order, so for a row several
    name, the later one wins (its verdict, suggested label, score and votes together, null
    included)."""
    whens = (
        f'WHEN {_CO}{i}."row" IS NOT NULL THEN {_CO}{i}.{field}' for i in reversed(range(count))
    )
    return "CASE " + " ".join(whens) + " END"


# The audit's verdicts say nothing of the label: no label error; decontaminated leaves them out.
_AUDITED = "(__dsreg_v IN ('duplicate', 'contaminated'))"
_IS_ERROR = (
    f"(__dsreg_v IS NOT NULL AND __dsreg_v NOT IN ('non_error', 'unreviewed') AND NOT {_AUDITED})"
)
_RELABEL = "(__dsreg_v IN ('correctable', 'suspected') AND __dsreg_s IS NOT NULL)"
# Which rows each view keeps (the view rule, as views/rule.py states it).
_KEEP: dict[str, str] = {
    "original": "TRUE",
    "cleaned": f"NOT {_IS_ERROR}",
    "corrected": f"(NOT {_IS_ERROR} OR {_RELABEL})",
    "honeypot": "(__dsreg_v = 'correctable' AND __dsreg_s IS NOT NULL)",
    "multilabel": "(__dsreg_v IS NULL OR __dsreg_v <> 'neither')",
    "decontaminated": f"(__dsreg_v IS NULL OR NOT {_AUDITED})",
}


def _served(view: View, tables: _ViewTables, inner: str) -> str:
    """The view's columns over ``inner`` (its rows with their corrections), the rows it keeps."""
    label = (
        f"CASE WHEN {_RELABEL} THEN __dsreg_s ELSE __dsreg_given END"
        if view in ("corrected", "honeypot", "multilabel")
        else "__dsreg_given"
    )
    names = (
        "(CAST([" + ", ".join(_lit(name) for name in tables.snapshot.classes) + "] AS VARCHAR[]))"
    )
    labels_col = _labels_column(label) if view == "multilabel" else ""
    if view != "multilabel" and "labels" in tables.rated:
        labels_col = ", __dsreg_l AS labels"
    if "label_counts" in tables.rated:
        labels_col += ", __dsreg_lc AS label_counts"
    meta_cols = "".join(f", {_ident(m)}" for m in tables.metadata)
    return (
        f'SELECT "row", example_id, CAST({label} AS INTEGER) AS label, '
        f"{names}[CAST({label} AS INTEGER) + 1] AS label_name, "
        "CAST(__dsreg_given AS INTEGER) AS given_label, __dsreg_v AS verdict, blob, size, "
        "CAST(__dsreg_s AS INTEGER) AS suggested_label, "
        f"{names}[CAST(__dsreg_s AS INTEGER) + 1] AS suggested_label_name, "
        "CAST(__dsreg_score AS DOUBLE) AS score, "
        + ", ".join(
            f"CAST(__dsreg_votes.{_ident(f)} AS INTEGER) AS votes_{f}" for f in COUNT_FIELDS
        )
        + f"{labels_col}{meta_cols} "
        f"FROM ({inner}) WHERE {_KEEP[view]}"
    )


def _labels_column(label: str) -> str:
    """The multilabel view's ``labels``: the last overlay's list where it gives one; else, for a
    multi_label row with a suggested label, the given and the suggested label ascending, once
    each; else the served label alone (a multi_label row is never relabelled: its served label
    is given)."""
    g, s = "CAST(__dsreg_given AS INTEGER)", "CAST(__dsreg_s AS INTEGER)"
    return (
        ", coalesce(__dsreg_l, CASE WHEN __dsreg_v = 'multi_label' AND __dsreg_s IS NOT NULL "
        f"AND {s} <> {g} THEN [least({g}, {s}), greatest({g}, {s})] "
        f"ELSE [CAST({label} AS INTEGER)] END) AS labels"
    )


# -- names in queries -------------------------------------------------------------------------


def quoted_names(query: str) -> list[str]:
    """The double-quoted identifiers of ``query`` that name revisions (hold ``@`` or start
    with ``blake3:``), in order of first appearance; string literals and comments are skipped."""
    found: dict[str, None] = {}
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch == "'":
            i += 1
            while i < n:
                if query[i] == "'":
                    if i + 1 < n and query[i + 1] == "'":
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        elif ch == "-" and query.startswith("--", i):
            j = query.find("\n", i)
            i = n if j < 0 else j + 1
        elif ch == "/" and query.startswith("/*", i):
            j = query.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif ch == "$":
            j = query.find("$", i + 1)
            tag = query[i : j + 1] if j > 0 else ""
            if tag and (tag == "$$" or tag[1:-1].replace("_", "a").isalnum()):
                k = query.find(tag, j + 1)
                i = n if k < 0 else k + len(tag)
            else:
                i += 1
        elif ch == '"':
            j = i + 1
            parts = []
            while j < n:
                if query[j] == '"':
                    if j + 1 < n and query[j + 1] == '"':
                        parts.append('"')
                        j += 2
                        continue
                    break
                parts.append(query[j])
                j += 1
            name = "".join(parts)
            if "@" in name or name.startswith(PREFIX):
                found[name] = None
            i = j + 1
        else:
            i += 1
    return list(found)


def _translate(e: duckdb.Error, query: str) -> DsregError:
    import duckdb

    msg = str(e).strip()
    if isinstance(e, duckdb.IOException):
        return StorageError(f"DuckDB could not read or write a file: {msg}")
    return QueryError(f"{msg}\nin query: {query.strip()[:500]}")


class Connection:
    """A DuckDB connection in which any ``"dataset@rev"`` quoted identifier names that revision's
    view (several per query; joins across revisions work).

    ``execute``/``sql`` resolve the names of a query, then hand it to DuckDB; everything else is
    DuckDB's own connection (``con.duckdb``), to which unknown attributes are forwarded.

    Read-only unless ``allow_files``: DuckDB's external access is off and its configuration
    locked before any query runs, so SQL reads the revisions' views and nothing else (no file
    read or written, no ATTACH, INSTALL, LOAD or SET); a refused statement raises ``QueryError``
    naming ``allow_files``. ``allow_files=True`` leaves DuckDB's full access on.

    Its reader resolves the names (the local registry, or a remote read into a registry or the
    cache: ``sql --remote``) and runs each read of the registry (a view's manifests and tables,
    a table DuckDB opens) through ``Reader.repairing``, so that an object a read of a remote
    finds missing or corrupt is fetched again.
    """

    def __init__(
        self,
        reader: Reader,
        con: duckdb.DuckDBPyConnection | None = None,
        *,
        allow_files: bool = False,
    ) -> None:
        # DuckDB is imported by the first connection, not by ``import dsreg``.
        import duckdb

        from dsreg.views.readonly import ObjectFiles, lock_down

        self.reader = reader
        self.registry = registry = reader.registry
        self.allow_files = allow_files
        self._unparsed: dict[str, DsregError] = {}
        self._files: ObjectFiles = ObjectFiles(
            lambda digest: reader.repairing(lambda: verified_object(registry, digest)),
            locked=not allow_files,
        )
        self.duckdb: duckdb.DuckDBPyConnection = con if con is not None else duckdb.connect()
        # The library never prints: no progress bar on long queries.
        self.duckdb.execute("SET enable_progress_bar = false")
        if allow_files:
            self.duckdb.register_filesystem(self._files)
        else:
            lock_down(self.duckdb, self._files)

    def __repr__(self) -> str:
        mode = "allow_files" if self.allow_files else "read-only"
        return f"<dsreg.Connection registry={str(self.registry.root)!r} {mode}>"

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        if name in ("duckdb", "reader", "registry", "allow_files", "_unparsed", "_files"):
            raise AttributeError(name)  # not yet set
        return getattr(self.duckdb, name)

    def close(self) -> None:
        self.duckdb.close()

    # -- views ----------------------------------------------------------------------------------
    def create_view(
        self, name: str, spec_or_revision: str | Revision, *, view: View | None = None
    ) -> str:
        """(Re)create temporary view ``name`` serving a spec or revision; return the digest."""
        if isinstance(spec_or_revision, Revision):
            rev = spec_or_revision
        else:
            rev = self.reader.repairing(partial(self.reader.revision, spec_or_revision)).revision
        import duckdb

        sql = self.reader.repairing(
            lambda: view_sql(self.registry, rev, view=view, locate=self._files.url)
        )
        self._files.take_failure()
        try:
            self.duckdb.execute(f"CREATE OR REPLACE TEMP VIEW {_ident(name)} AS {sql}")
        except duckdb.Error as e:
            raise self._error(e, sql) from e
        return rev.digest

    def resolve_names(self, query: str) -> dict[str, str]:
        """Create a view for every revision ``query`` names; return ``{name: revision digest}``.

        A name that is not a spec at all (a column alias ``"a@B"``) is left to DuckDB; if DuckDB
        then finds no such table, the spec's own error is raised. A spec that resolves to
        nothing raises at once, since that is what the query meant.
        """
        out: dict[str, str] = {}
        self._unparsed = {}
        for name in quoted_names(query):
            try:
                resolved = self.reader.repairing(partial(self.reader.revision, name))
            except (InvalidSpecError, InvalidNameError) as e:
                self._unparsed[name] = e
                continue
            out[name] = self.create_view(name, resolved.revision)
        return out

    def _error(self, e: duckdb.Error, query: str) -> DsregError:
        import duckdb

        from dsreg.views.readonly import read_only_error

        refused = read_only_error(e, self._files)
        if refused is not None:
            return refused
        if isinstance(e, duckdb.CatalogException):
            for name, err in self._unparsed.items():
                if name in str(e):
                    return err
        return _translate(e, query)

    # -- queries --------------------------------------------------------------------------------
    def execute(self, query: str, parameters: Sequence[Any] | None = None) -> Connection:
        """Resolve the revisions ``query`` names and run it; fetch with ``fetchall`` etc."""
        import duckdb

        self.resolve_names(query)
        self._files.take_failure()
        try:
            if parameters is None:
                self.duckdb.execute(query)
            else:
                self.duckdb.execute(query, parameters)
        except duckdb.Error as e:
            raise self._error(e, query) from e
        return self

    def sql(self, query: str) -> duckdb.DuckDBPyRelation:
        """Resolve the revisions ``query`` names; return DuckDB's (lazy) relation for it."""
        import duckdb

        self.resolve_names(query)
        self._files.take_failure()
        try:
            return self.duckdb.sql(query)
        except duckdb.Error as e:
            raise self._error(e, query) from e

    query = sql

    def fetchall(self) -> list[tuple[Any, ...]]:
        import duckdb

        try:
            return self.duckdb.fetchall()
        except duckdb.Error as e:
            raise self._error(e, "") from e

    def fetchone(self) -> tuple[Any, ...] | None:
        import duckdb

        try:
            return self.duckdb.fetchone()
        except duckdb.Error as e:
            raise self._error(e, "") from e

    def table(self, query: str) -> pa.Table:
        """Run ``query``; the whole result as an Arrow table."""
        import duckdb

        rel = self.sql(query)
        if rel is None:
            return pa.table({})
        try:
            # DuckDB 1.4 renamed fetch_arrow_table to to_arrow_table (2.0 warns on the old name).
            fetch = getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table
            table: pa.Table = fetch()
            return table
        except duckdb.Error as e:
            raise self._error(e, query) from e

    def batches(
        self, query: str, *, rows: int = 1 << 16
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """Run ``query``; its schema and its rows as a stream of record batches (bounded memory)."""
        import duckdb

        rel = self.sql(query)
        if rel is None:
            return pa.schema([]), iter(())
        try:
            fetch = getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader
            reader: pa.RecordBatchReader = fetch(rows)
        except duckdb.Error as e:
            raise self._error(e, query) from e

        def stream() -> Iterator[pa.RecordBatch]:
            try:
                yield from reader
            except duckdb.Error as e:
                raise self._error(e, query) from e
            except DsregError:
                raise
            except (pa.ArrowException, OSError) as e:
                # DuckDB's errors while the reader streams come through Arrow, some as a plain
                # OSError (a failed cast): the query's failure, not a file's.
                failure = self._files.take_failure()
                if failure is not None:
                    raise failure from e
                raise QueryError(f"the query failed while its rows were read: {e}") from e

        return reader.schema, stream()


def query_revision(
    reader: Reader, revision: Revision, query: str, *, allow_files: bool = False
) -> pa.Table:
    """Run ``query`` with ``this`` naming ``revision``'s view (``Dataset.sql``); other revisions
    may be named as ``"dataset@tag"`` in the same query. The whole result as an Arrow table.
    Read-only unless ``allow_files`` (see ``Connection``)."""
    with Connection(reader, allow_files=allow_files) as con:
        con.create_view("this", revision)
        return con.table(query)
