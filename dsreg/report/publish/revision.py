"""A published revision's page (``site/tags/<dataset>/<tag>.html``), and what the dataset pages
share with it: where pages live, the data they are made from, notices and tables."""

from __future__ import annotations

import dataclasses
import json
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from dsreg.errors import DsregError
from dsreg.formats.manifests import VERDICTS, Revision
from dsreg.objects.digest import short
from dsreg.registry.folder import Registry
from dsreg.registry.marks import Retirement, Yank
from dsreg.registry.reader import Resolved, pinned
from dsreg.remote.store import OBJECTS
from dsreg.report import cite as report_cite
from dsreg.report import diff as report_diff
from dsreg.report.croissant.document import VIEW_FILE, Croissant, Layout, build
from dsreg.report.croissant.provenance import lineage, revision_iri
from dsreg.report.publish import html as h
from dsreg.report.publish.board import score_cell
from dsreg.report.publish.pinned import PinnedView
from dsreg.report.show import RevisionInfo

__all__ = [
    "INDEX",
    "SITE_FILES",
    "Parent",
    "SiteDataset",
    "SiteOptions",
    "SiteTag",
    "croissant_file",
    "dataset_page",
    "json_bytes",
    "parent_of",
    "pins_table",
    "placed_document",
    "retired_notice",
    "tag_croissant",
    "tag_files",
    "tag_page",
]

INDEX = "index.html"
#: The files the site's Croissant documents name besides the remote's objects (each view's
#: Parquet, each list of payloads), named by their sha256: each is written once.
SITE_FILES = "site/files/sha256"


def dataset_page(dataset: str) -> str:
    return f"site/datasets/{dataset}.html"


def tag_page(dataset: str, tag: str) -> str:
    return f"site/tags/{dataset}/{tag}.html"


def croissant_file(page: str) -> str:
    """The Croissant JSON-LD file beside ``page``."""
    return page.removesuffix(".html") + ".croissant.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteOptions:
    """How ``dsreg publish`` writes a site: ``url``, where readers reach the remote (named by
    ``dsreg.open``, ``checkout`` and the citations); ``absolute``: ``url`` is the address given
    with ``--url``, so the Croissant documents name their files and pages by it (else by paths
    relative to themselves); ``authors``, the creators the citations and documents name;
    ``license``, the licence of a dataset whose snapshot records none; ``resamples``, the
    leaderboard's bootstrap resamples."""

    url: str
    absolute: bool = False
    authors: tuple[str, ...] = ()
    license: str | None = None
    resamples: int = 1000

    def page_url(self, path: str) -> str | None:
        """The URL of the site's file ``path`` (below the site's root); ``None`` without
        ``--url``."""
        return self.url.rstrip("/") + "/" + quote(path) if self.absolute else None

    def link(self, path: str) -> str:
        """``path`` as the pages' commands name it: its URL, or ``url`` (the remote as given)
        followed by the path."""
        return self.page_url(path) or self.url.rstrip("/") + "/" + path

    def base(self, here: str) -> str:
        """What a file at ``here`` puts before a path below the site's root to link it: the
        site's URL, or the relative path up to the root."""
        return self.url.rstrip("/") + "/" if self.absolute else "../" * here.count("/")

    @property
    def layout(self) -> Layout:
        """Where the site's documents put their files: the view's Parquet and the payloads'
        CSV under ``SITE_FILES``, the tables and payloads the remote's own objects (the push
        sent them: nothing is copied), each payload in the CSV by its URL (or path below the
        site's root). No ``FileSet``: a web server does not list its folders."""
        return Layout(
            view=f"{SITE_FILES}/{{sha256}}.parquet",
            payload_list=f"{SITE_FILES}/{{sha256}}.csv",
            tables=OBJECTS,
            payloads=OBJECTS,
            listed=self.base(""),
            file_set=False,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteTag:
    """A tag as its pages show it: the revision described, and its yank if it is yanked."""

    dataset: str
    tag: str
    resolved: Resolved
    info: RevisionInfo
    yank: Yank | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteDataset:
    """A dataset as its pages show it: its tags in the order they were first set, its
    retirement, the leaderboard of its recorded models (``None``: none recorded) and the
    views pinned on the remote, by revision."""

    name: str
    tags: tuple[SiteTag, ...]
    retired: Retirement | None
    board: dict[str, Any] | None
    pins: dict[str, PinnedView]


def json_bytes(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def retired_notice(here: str, retired: Retirement | None) -> str:
    if retired is None:
        return ""
    return (
        '<p class="notice retired" id="retired">Retired: '
        + h.esc(retired.reason)
        + ". Its successor is "
        + h.link(h.rel(here, dataset_page(retired.successor)), retired.successor)
        + ".</p>"
    )


def pins_table(here: str, pins: Iterable[PinnedView]) -> str:
    rows = [
        [
            h.code(short(p.revision)),
            h.esc(p.view),
            h.esc(f"{p.rows:,}"),
            h.link(h.rel(here, p.path), "Parquet") + " " + h.code(f"sha256:{p.sha256}"),
        ]
        for p in pins
    ]
    if not rows:
        return (
            '<p class="muted">None yet: <code>dsreg export DATASET@TAG --to REMOTE</code> pins a '
            "view as Parquet for any engine to read by URL.</p>"
        )
    return h.table(["Revision", "View", "Rows", "File"], rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class Parent:
    """What a tag's revision derives from: the revision, and the tag naming it if one does."""

    resolved: Resolved
    tag: SiteTag | None

    @property
    def name(self) -> str:
        """``dataset@tag``, or the digest (the snapshot's for its original view)."""
        return f"{self.tag.dataset}@{self.tag.tag}" if self.tag else self.resolved.spec


def parent_of(ds: SiteDataset, t: SiteTag) -> Parent | None:
    """What ``t``'s revision derives from, as its Croissant document says (``lineage``: the
    same view without its last overlay, or the snapshot's original view), named by a tag of
    it if one does, else by its digest (the snapshot's for its original view); ``None`` for a
    snapshot's original view itself, or a parent this registry does not hold."""
    previous = lineage(t.info.manifest).previous
    if previous is None:
        return None
    named = [o for o in ds.tags if o.info.revision == previous]
    named.sort(key=lambda o: o.yank is not None)
    if named:
        return Parent(resolved=named[0].resolved, tag=named[0])
    if previous == Revision(snapshot=t.info.snapshot).digest:
        previous = t.info.snapshot  # a snapshot's digest stands for its original view
    if not t.resolved.registry.store.has(previous):
        return None
    return Parent(resolved=pinned(t.resolved.reader, previous), tag=None)


# What each list of a diff's sample ids holds, from this revision's side.
_SAMPLES = {"only_a": "removed here", "only_b": "added here", "relabelled": "relabelled"}

# -- the page ------------------------------------------------------------------------------------


def tag_croissant(t: SiteTag, opts: SiteOptions) -> Croissant:
    """``t``'s Croissant document and the files it names, as the site places them."""
    return build(
        t.resolved, authors=opts.authors, url=opts.url, layout=opts.layout, license=opts.license
    )


def placed_document(c: Croissant, here: str, t: SiteTag, opts: SiteOptions) -> dict[str, Any]:
    """``t``'s document as the page ``here`` holds it (and its file beside it): its files by
    URL or relative to it, ``url`` that page's URL and ``sameAs`` the tag's page's (without
    ``--url``, both the revision's IRI)."""
    iri = revision_iri(t.info.revision)
    return c.placed(
        opts.base(here),
        url=opts.page_url(here) or iri,
        same_as=opts.page_url(tag_page(t.dataset, t.tag)) or iri,
    )


def tag_files(ds: SiteDataset, t: SiteTag, c: Croissant, opts: SiteOptions) -> dict[str, bytes]:
    """The page of ``t`` and its Croissant file (``c``, placed)."""
    here = tag_page(t.dataset, t.tag)
    spec = f"{t.dataset}@{t.tag}"
    reg = t.resolved.registry
    doc = placed_document(c, here, t, opts)
    parts = [
        _yank_notice(t),
        retired_notice(here, ds.retired),
        _summary(here, t),
        h.section("Label card", _label_card(reg, t), ident="label-card"),
        h.section("Load it", _loading(here, ds, t, c, opts), ident="load"),
        h.section("Changes", _changes(reg, here, ds, t), ident="diff"),
        h.section("Cite it", _citation(t.resolved, opts), ident="cite"),
        h.section("Leaderboard", _board(ds, t), ident="leaderboard"),
        h.section(
            "Croissant",
            "<p>"
            + h.link(h.rel(here, croissant_file(here)), "Croissant JSON-LD")
            + " (also embedded in this page).</p>",
        ),
    ]
    crumbs = [(INDEX, "datasets"), (dataset_page(t.dataset), t.dataset)]
    page = h.page(spec, "\n".join(parts), here=here, crumbs=crumbs, head=h.json_ld(doc))
    return {here: page, croissant_file(here): json_bytes(doc)}


def _yank_notice(t: SiteTag) -> str:
    if t.yank is None:
        return ""
    return f'<p class="notice" id="yanked">Yanked: {h.esc(t.yank.reason)}</p>'


def _summary(here: str, t: SiteTag) -> str:
    info = t.info
    rows = [
        ["Revision", h.code(info.revision, ident="revision-digest")],
        ["View", h.esc(info.view)],
        ["Rows", h.esc(f"{info.rows:,} of {info.snapshot_rows:,}")],
        ["Classes", h.wrap(", ".join(info.classes))],
        ["Snapshot", h.code(info.snapshot)],
    ]
    overlays = [
        [
            h.code(short(o["digest"])),
            h.esc(o["kind"]),
            h.esc(o.get("producer", "")),
            h.esc(o["rows"]),
        ]
        for o in info.overlays
    ]
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    out = h.scroll(f"<table>{table}</table>", "Revision")
    if overlays:
        out += "<h2>Overlays</h2>" + h.table(["Overlay", "Kind", "Producer", "Rows"], overlays)
    return out


def _label_card(reg: Registry, t: SiteTag) -> str:
    """The label card (``dsreg show``'s quality lines) and each overlay's verdict counts."""
    card = t.info.label_quality
    lines = card.lines() if card is not None else ["unknown"]
    out = "<ul>" + "".join(f"<li>{h.esc(line)}</li>" for line in lines) + "</ul>"
    for o in t.info.overlays:
        summary = reg.overlay(o["digest"]).summary
        rows = [[h.esc(v), h.esc(f"{summary[v]:,}")] for v in VERDICTS if summary.get(v)]
        out += f"<p>Verdicts of overlay {h.code(short(o['digest']))} ({h.esc(o['kind'])}):</p>"
        out += h.table(["Verdict", "Rows"], rows, numeric=1)
    return out


def _loading(here: str, ds: SiteDataset, t: SiteTag, c: Croissant, opts: SiteOptions) -> str:
    digest = t.info.revision
    python = f'import dsreg\nds = dsreg.open("{digest}", remote="{opts.url}")\nlabels = ds.labels()'
    shell = f"dsreg checkout {digest} {t.dataset} --remote {opts.url}"
    out = (
        "<p>In Python (no registry needed; objects are fetched, verified, into the cache):</p>"
        + h.pre(python, ident="load-python")
        + "<p>As files:</p>"
        + h.pre(shell, ident="load-checkout")
        + _croissant_loading(here, opts)
    )
    files = [_view_file(c)]
    pin = ds.pins.get(digest)
    if pin is not None:
        files.append(
            ParquetFile(path=pin.path, sha256=pin.sha256, size=pin.size, rows=pin.rows,
                        name="pinned view", what="row, example_id, label, label_name")
        )  # fmt: skip
    rows = [
        [h.link(h.rel(here, f.path), f.name), h.wrap(f.what), h.esc(f"{f.rows:,}"),
         h.code(f.sha256)]
        for f in files
    ]  # fmt: skip
    shown = files[-1]  # the pinned view if there is one: the smaller file
    link = opts.link(shown.path)
    out += (
        "<p>The view as Parquet, for any engine (no dsreg):</p>"
        + h.table(["File", "Columns", "Rows", "sha256"], rows)
        + h.pre(f"SELECT * FROM read_parquet('{link}')", ident="load-sql")
        + _ranges_and_fallback(shown, link)
    )
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ParquetFile:
    """A Parquet file of a revision's view on the site: its path below the site's root, sha256,
    size in bytes, rows, its name on the page and which columns it holds."""

    path: str
    name: str
    sha256: str
    size: int
    rows: int
    what: str


def _view_file(c: Croissant) -> ParquetFile:
    """The view's Parquet the Croissant document names (every column of ``labels()``)."""
    entry = next(d for d in c.document["distribution"] if d["@id"] == VIEW_FILE)
    return ParquetFile(
        path=entry["contentUrl"],
        sha256=entry["sha256"],
        size=int(entry["contentSize"].removesuffix(" B")),
        rows=c.rows,
        name="view",
        what="every column of labels(), as the Croissant labels record set reads it",
    )


def _croissant_loading(here: str, opts: SiteOptions) -> str:
    doc = croissant_file(here)
    url = opts.page_url(doc)
    if url is None:
        return (
            "<p>With Croissant: "
            + h.link(h.rel(here, doc), "its JSON-LD")
            + " names its files by paths relative to itself (this site was published without "
            "<code>--url</code>), so a Croissant reader reads it from a copy of the site on "
            "disk, not by URL:</p>"
            + h.pre(
                f'import mlcroissant as mlc\nrecords = mlc.Dataset("{doc}").records("labels")',
                ident="load-croissant",
            )
        )
    return "<p>With Croissant (no dsreg; every file it names is on this site):</p>" + h.pre(
        f'import mlcroissant as mlc\nrecords = mlc.Dataset("{url}").records("labels")',
        ident="load-croissant",
    )


def _ranges_and_fallback(f: ParquetFile, link: str) -> str:
    """Which engines need a server that answers byte ranges, and what a reader whose engine
    cannot fetch the file does instead: download it, check its sha256, read it from disk."""
    name = posixpath.basename(f.path)
    fallback = (
        f"curl -fsSLO {link}\n"
        f'echo "{f.sha256}  {name}" | sha256sum -c -\n'
        f"python -c \"import pyarrow.parquet as pq; print(pq.read_table('{name}'))\""
    )
    return (
        '<p id="ranges">Polars, and pyarrow through fsspec\'s HTTP file system, read a '
        "Parquet file's footer first with an HTTP range request: they need a server that "
        "answers ranges, as object stores and most web servers do (<code>python -m "
        "http.server</code> does not). DuckDB (httpfs), pandas and Ray Data read it from any "
        "server.</p>"
        f"<p>If your engine cannot fetch it (a server without ranges, no network where it "
        f"runs): download it ({h.esc(f'{f.size:,}')} bytes), check its sha256 (the check "
        "prints OK), and read it from disk:</p>" + h.pre(fallback, ident="load-fallback")
    )


def _changes(reg: Registry, here: str, ds: SiteDataset, t: SiteTag) -> str:
    parent = parent_of(ds, t)
    if parent is None:
        return "<p>The snapshot's original view: it derives from no other revision.</p>"
    tag = parent.tag
    try:
        d = report_diff.diff(parent.resolved, t.resolved)
    except DsregError as e:
        return f"<p>Cannot compare with {h.esc(parent.name)}: {h.esc(e)}</p>"
    name = (
        h.link(h.rel(here, tag_page(t.dataset, tag.tag)), tag.tag) if tag else h.code(parent.name)
    )
    rows = [
        ["Rows there", h.esc(f"{d.rows_a:,}")],
        ["Rows here", h.esc(f"{d.rows_b:,}")],
        ["Removed here", h.esc(f"{d.only_a:,}")],
        ["Added here", h.esc(f"{d.only_b:,}")],
        ["Relabelled", h.esc(f"{d.relabelled:,}")],
    ]
    out = f"<p>Compared with {name} (<code>dsreg diff</code>):</p>" + h.table(
        ["", "Rows"], rows, numeric=1
    )
    if d.transitions:
        moves = [[h.esc(x.source), h.esc(x.target), h.esc(f"{x.count:,}")] for x in d.transitions]
        out += h.table(["From", "To", "Rows"], moves, numeric=1)
    for kind, ids in d.samples.items():
        if ids:
            what = _SAMPLES.get(kind, kind)
            out += f"<p>First ids {h.esc(what)}: {h.esc(', '.join(ids))}</p>"
    return out


def _citation(r: Resolved, opts: SiteOptions) -> str:
    c = report_cite.cite(r, authors=opts.authors, url=opts.url)
    if c.license is None and opts.license is not None:
        c = dataclasses.replace(c, license=opts.license)
    return (
        "<p>BibTeX:</p>"
        + h.pre(c.render("bibtex"), ident="cite-bibtex")
        + "<p>Text:</p>"
        + h.pre(c.render("text"), ident="cite-text")
    )


def _board(ds: SiteDataset, t: SiteTag) -> str:
    if ds.board is None:
        return '<p class="muted">No results recorded for this dataset.</p>'
    rev = next((r for r in ds.board["revisions"] if r["revision"] == t.info.revision), None)
    if rev is None:
        return '<p class="muted">This revision is not on the leaderboard.</p>'
    rows = [
        [h.esc(m), score_cell(rev, m, t.info.view)]
        for m in sorted(ds.board["models"])
        if score_cell(rev, m, t.info.view)
    ]
    return (
        f"<p>Each recorded model on the {h.esc(t.info.view)} view (<code>dsreg leaderboard "
        f"{h.esc(t.dataset)}</code>): accuracy, 95% interval, rank.</p>"
        + h.table(["Model", "Accuracy"], rows, numeric=1)
    )
