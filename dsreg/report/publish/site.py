"""``dsreg publish``: a registry's remote as a static website.

Beside what a push writes, the remote gets:

- ``index.html``: every dataset, its tags and whether it is retired;
- ``site/datasets/<dataset>.html``: its tags (yanked ones struck through, with the reason),
  the leaderboard of its recorded models on each tag, drawn as a rank chart and as a table,
  its pinned views, and the Croissant JSON-LD of its newest tag that is not yanked (embedded,
  and beside it as ``<dataset>.croissant.json``);
- ``site/tags/<dataset>/<tag>.html``: one revision: its digest, view, rows, overlays and their
  verdict counts, label card, the diff to the revision it derives from, its citation (BibTeX
  and text), how to load it (``dsreg.open(DIGEST, remote=URL)``, ``dsreg checkout``,
  Croissant, its Parquet views and what to do when an engine cannot fetch them), the
  leaderboard on it, and its Croissant JSON-LD (embedded, and beside it as
  ``<tag>.croissant.json``);
- ``site/files/sha256/<hex>.parquet|.csv``: each view's Parquet and each list of payloads the
  Croissant documents name, by sha256, written once; the tables and payloads they name are the
  remote's own objects (``files/blake3/…``), which the push sent.

With ``--url`` (``SiteOptions.absolute``) every link of a Croissant document is a URL below it,
so a reader loads the document by URL and every file it names answers there; without, they are
relative to the document, which a reader then loads from disk. The pages themselves link
relatively either way.

The pages are built from this registry (after the push, so the remote holds everything they
name) and written whole, the data files first and the index last: a reader never follows a
link from the index to a page not yet written, nor from a page to a file not yet written. A
revision derives from the revision of the same snapshot with all but its last overlay (the same
view if tagged, else the original view), or, with no overlay, from the snapshot's original
view.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dsreg._util.records import FieldDict
from dsreg.errors import NotFoundError
from dsreg.objects.digest import short
from dsreg.registry.marks import Retirement, Yank
from dsreg.registry.reader import Resolved
from dsreg.remote.store import RemoteStore
from dsreg.remote.transfer import PushResult
from dsreg.report import show as report_show
from dsreg.report.board.leaderboard import BOARD_VIEWS, leaderboard
from dsreg.report.croissant.document import Croissant
from dsreg.report.publish import html as h
from dsreg.report.publish.board import board_columns, board_table, rank_chart
from dsreg.report.publish.pinned import pinned_views
from dsreg.report.publish.revision import (
    INDEX,
    SiteDataset,
    SiteOptions,
    SiteTag,
    croissant_file,
    dataset_page,
    json_bytes,
    pins_table,
    placed_document,
    retired_notice,
    tag_croissant,
    tag_files,
    tag_page,
)

__all__ = ["Published", "PublishedSite", "SiteOptions", "write_site"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedSite(FieldDict):
    """The pages ``publish`` wrote (paths below the remote's root) and the URL they name;
    ``absolute``: it was given (``--url``), so the Croissant documents load by URL."""

    url: str
    absolute: bool  # --url given: the Croissant documents name their files by URL
    index: str
    pages: tuple[str, ...]
    datasets: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Published:
    """What ``dsreg publish`` did: the push, then the site."""

    push: PushResult
    site: PublishedSite

    def to_dict(self) -> dict[str, object]:
        return {"push": self.push.to_dict(), "site": self.site.to_dict()}


def write_site(
    tagged: Mapping[str, Sequence[Resolved]], rs: RemoteStore, opts: SiteOptions
) -> PublishedSite:
    """Write the site's pages and files to ``rs`` as ``opts`` says (module docstring): a page
    per dataset of ``tagged`` and per revision its tags name (yanked ones too, in the order
    their tags were first set)."""
    files: dict[str, bytes] = {}
    datasets = [_gather(name, tags, rs, opts.resamples) for name, tags in tagged.items()]
    for ds in datasets:
        files.update(_dataset_files(rs, ds, opts))
    for path, data in sorted(files.items()):
        rs.write(rs.path(*path.split("/")), data)
    rs.write(rs.path(INDEX), _index(datasets))
    return PublishedSite(
        url=opts.url,
        absolute=opts.absolute,
        index=INDEX,
        pages=(*sorted(p for p in files if p.endswith(".html")), INDEX),
        datasets=tuple(ds.name for ds in datasets),
    )


def _write_once(rs: RemoteStore, files: dict[str, bytes]) -> None:
    """Write each content-addressed file the remote does not hold whole already."""
    for path, data in sorted(files.items()):
        where = rs.path(*path.split("/"))
        try:
            held = os.stat(where).st_size if rs.local else int(rs.fs.size(where))
        except FileNotFoundError:
            held = None
        except OSError as e:
            raise rs.error(f"read {where} on", e) from None
        if held != len(data):
            rs.write(where, data)


def _gather(
    dataset: str, revisions: Sequence[Resolved], rs: RemoteStore, resamples: int
) -> SiteDataset:
    tags = []
    reader = revisions[0].reader
    marks = reader.marks(dataset)
    for r in revisions:
        assert r.tag is not None  # every revision of a site is reached by its tag
        reason = marks.yanks.get(r.tag)
        yank = None if reason is None else Yank(reason=reason, revision=r.digest)
        info = report_show.describe(r)
        tags.append(SiteTag(dataset=dataset, tag=r.tag, resolved=r, info=info, yank=yank))
    scored = [r for r in revisions if r.tag not in marks.yanks]
    try:
        board = leaderboard(
            reader, dataset, scored, views=BOARD_VIEWS, resamples=resamples
        ).to_dict()
    except NotFoundError:
        board = None  # no model recorded, or no tag left to score
    retired = marks.retired
    return SiteDataset(
        name=dataset,
        tags=tuple(tags),
        retired=None if retired is None else Retirement(successor=retired[0], reason=retired[1]),
        board=board,
        pins=pinned_views(rs, dataset),
    )


# -- the index -----------------------------------------------------------------------------------


def _index(datasets: list[SiteDataset]) -> bytes:
    rows = []
    for ds in datasets:
        live = [t for t in ds.tags if t.yank is None]
        newest = live[-1] if live else None
        state = "retired: use " + ds.retired.successor if ds.retired else ""
        rows.append(
            [
                h.link(h.rel(INDEX, dataset_page(ds.name)), ds.name),
                h.esc(len(ds.tags)),
                h.link(h.rel(INDEX, tag_page(ds.name, newest.tag)), newest.tag) if newest else "",
                h.esc(state),
            ]
        )
    body = (
        h.table(["Dataset", "Tags", "Newest tag", "Status"], rows)
        if rows
        else "<p>No datasets.</p>"
    )
    return h.page("Datasets", body, here=INDEX)


# -- a dataset's page ----------------------------------------------------------------------------


def _dataset_files(rs: RemoteStore, ds: SiteDataset, opts: SiteOptions) -> dict[str, bytes]:
    """The pages of ``ds`` and of its tags, and their Croissant files; the data files those
    name are written to ``rs`` here, before any page."""
    files: dict[str, bytes] = {}
    documents: dict[str, Croissant] = {}
    for t in ds.tags:
        c = documents[t.tag] = tag_croissant(t, opts)
        _write_once(rs, c.files)
        files.update(tag_files(ds, t, c, opts))
    here = dataset_page(ds.name)
    parts = [retired_notice(here, ds.retired)]
    rows = [
        [
            h.link(
                h.rel(here, tag_page(ds.name, t.tag)), t.tag, cls="tag-yanked" if t.yank else None
            ),
            h.esc(t.info.view),
            h.esc(f"{t.info.rows:,}"),
            h.code(short(t.info.revision)),
            h.wrap(f"yanked: {t.yank.reason}") if t.yank else "",
        ]
        for t in ds.tags
    ]
    parts.append(h.section("Tags", h.table(["Tag", "View", "Rows", "Revision", ""], rows)))
    parts.append(h.section("Leaderboard", _board_table(ds), ident="leaderboard"))
    parts.append(h.section("Pinned views", pins_table(here, ds.pins.values())))
    live = [t for t in ds.tags if t.yank is None]
    head = ""
    if live:
        # The newest tag's document, placed on this page.
        doc = placed_document(documents[live[-1].tag], here, live[-1], opts)
        files[croissant_file(here)] = json_bytes(doc)
        head = h.json_ld(doc)
        parts.append(
            h.section(
                "Croissant",
                f"<p>The Croissant metadata of {h.esc(ds.name)}@{h.esc(live[-1].tag)}: "
                + h.link(h.rel(here, croissant_file(here)), "JSON-LD")
                + " (also embedded in this page).</p>",
            )
        )
    crumbs = [(INDEX, "datasets")]
    files[here] = h.page(ds.name, "\n".join(parts), here=here, crumbs=crumbs, head=head)
    return files


def _board_table(ds: SiteDataset) -> str:
    """The rank chart of each recorded model across the tags (each in its own view), then the
    table of its accuracy, interval and rank on each (``board``)."""
    if ds.board is None:
        return (
            '<p class="muted">No results recorded: <code>dsreg eval '
            f"{h.esc(ds.name)}@TAG PREDICTIONS --record</code>, then publish again.</p>"
        )
    cols = board_columns(ds.board, [(t.tag, t.info.revision, t.info.view) for t in ds.tags])
    models = sorted(ds.board["models"])
    if len(cols) < 2:
        chart = '<p class="muted">One tag on the leaderboard: no re-ranking to draw.</p>'
    else:
        svg = rank_chart(cols, models, title=f"{ds.name}: model rank by top-1 accuracy per tag")
        chart = (
            "<p>Each model's rank (1 = best, by top-1 accuracy) on each tag in its own view: "
            "a line climbs green, falls red, stays grey; a bar is the 95% bootstrap rank "
            "interval, so a re-ranking inside the bars may be noise.</p>"
            + h.scroll(svg, "Rank chart")
        )
    return chart + board_table(cols, models)
