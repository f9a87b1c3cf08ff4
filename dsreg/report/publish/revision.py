"""A published revision's page (``site/tags/<dataset>/<tag>.html``), and what the dataset pages
share with it: where pages live, the data they are made from, notices and tables."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dsreg.errors import DsregError
from dsreg.formats.manifests import VERDICTS, Revision
from dsreg.objects.digest import short
from dsreg.registry.folder import Registry
from dsreg.registry.marks import Retirement, Yank
from dsreg.registry.reader import Resolved, pinned
from dsreg.remote.config import remote_url as default_url
from dsreg.report import cite as report_cite
from dsreg.report import diff as report_diff
from dsreg.report.croissant import croissant_metadata
from dsreg.report.croissant.provenance import lineage
from dsreg.report.publish import html as h
from dsreg.report.publish.pinned import PinnedView
from dsreg.report.show import RevisionInfo

__all__ = [
    "INDEX",
    "Parent",
    "SiteDataset",
    "SiteTag",
    "croissant_file",
    "dataset_page",
    "json_bytes",
    "parent_of",
    "pins_table",
    "retired_notice",
    "score_cell",
    "tag_files",
    "tag_page",
]

INDEX = "index.html"


def dataset_page(dataset: str) -> str:
    return f"site/datasets/{dataset}.html"


def tag_page(dataset: str, tag: str) -> str:
    return f"site/tags/{dataset}/{tag}.html"


def croissant_file(page: str) -> str:
    """The Croissant JSON-LD file beside ``page``."""
    return page.removesuffix(".html") + ".croissant.json"


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


def score_cell(board_rev: dict[str, Any], model: str, view: str) -> str:
    """A model's accuracy on one revision's view: percent, 95% interval and rank."""
    s = board_rev["scores"].get(model, {}).get(view)
    if not s or s.get("accuracy") is None:
        return ""
    lo, hi = s["interval"]
    return h.esc(f"{100 * s['accuracy']:.2f}% [{100 * lo:.1f}, {100 * hi:.1f}] #{s['rank']}")


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


def tag_files(ds: SiteDataset, t: SiteTag, url: str) -> dict[str, bytes]:
    """The page of ``t`` and its Croissant file."""
    here = tag_page(t.dataset, t.tag)
    spec = f"{t.dataset}@{t.tag}"
    reg = t.resolved.registry
    doc = croissant_metadata(t.resolved, url=default_url(reg))
    parts = [
        _yank_notice(t),
        retired_notice(here, ds.retired),
        _summary(here, t),
        h.section("Label card", _label_card(reg, t), ident="label-card"),
        h.section("Load it", _loading(here, ds, t, url), ident="load"),
        h.section("Changes", _changes(reg, here, ds, t), ident="diff"),
        h.section("Cite it", _citation(t.resolved, url), ident="cite"),
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
        ["Classes", h.esc(", ".join(info.classes))],
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
    out = f"<table>{table}</table>"
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


def _loading(here: str, ds: SiteDataset, t: SiteTag, url: str) -> str:
    digest = t.info.revision
    python = f'import dsreg\nds = dsreg.open("{digest}", remote="{url}")\nlabels = ds.labels()'
    shell = f"dsreg checkout {digest} {t.dataset} --remote {url}"
    out = (
        "<p>In Python (no registry needed; objects are fetched, verified, into the cache):</p>"
        + h.pre(python, ident="load-python")
        + "<p>As files:</p>"
        + h.pre(shell, ident="load-checkout")
    )
    pin = ds.pins.get(digest)
    if pin is not None:
        link = url.rstrip("/") + "/" + pin.path
        sql = f"SELECT * FROM read_parquet('{link}')"
        out += (
            "<p>The view as Parquet, for any engine (no dsreg): "
            + h.link(h.rel(here, pin.path), pin.path)
            + f", sha256 {h.code(pin.sha256)}, {h.esc(f'{pin.rows:,}')} rows.</p>"
            + h.pre(sql, ident="load-sql")
        )
    return out


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


def _citation(r: Resolved, url: str) -> str:
    bib = report_cite.cite(r, format="bibtex", url=url)
    text = report_cite.cite(r, format="text", url=url)
    return (
        "<p>BibTeX:</p>"
        + h.pre(str(bib), ident="cite-bibtex")
        + "<p>Text:</p>"
        + h.pre(str(text), ident="cite-text")
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
