"""``dsreg publish``: a registry's remote as a static website.

Beside what a push writes, the remote gets:

- ``index.html``: every dataset, its tags and whether it is retired;
- ``site/datasets/<dataset>.html``: its tags (yanked ones struck through, with the reason),
  the leaderboard of its recorded models on each tag, its pinned views, and the Croissant
  JSON-LD of its newest tag that is not yanked (embedded, and beside it as
  ``<dataset>.croissant.json``);
- ``site/tags/<dataset>/<tag>.html``: one revision: its digest, view, rows, overlays and their
  verdict counts, label card, the diff to the revision it derives from, its citation (BibTeX
  and text), how to load it (``dsreg.open(DIGEST, remote=URL)``, ``dsreg checkout``, its pinned
  Parquet view), the leaderboard on it, and its Croissant JSON-LD (embedded, and beside it as
  ``<tag>.croissant.json``).

The pages are built from this registry (after the push, so the remote holds everything they
name) and written whole, the index last: a reader never follows a link from the index to a page
not yet written. A revision derives from the revision of the same snapshot with all but its last
overlay (the same view if tagged, else the original view), or, with no overlay, from the
snapshot's original view.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dsreg._util.jsonread import loads
from dsreg._util.records import FieldDict
from dsreg.errors import IntegrityError, NotFoundError
from dsreg.objects.digest import short
from dsreg.registry.marks import Retirement, Yank
from dsreg.registry.reader import Resolved
from dsreg.remote.store import RemoteStore
from dsreg.remote.transfer import PushResult
from dsreg.report import show as report_show
from dsreg.report.board.leaderboard import BOARD_VIEWS, leaderboard
from dsreg.report.publish import html as h
from dsreg.report.publish.pinned import pinned_views
from dsreg.report.publish.revision import (
    INDEX,
    SiteDataset,
    SiteTag,
    croissant_file,
    dataset_page,
    pins_table,
    retired_notice,
    score_cell,
    tag_files,
    tag_page,
)

__all__ = ["Published", "PublishedSite", "write_site"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedSite(FieldDict):
    """The pages ``publish`` wrote (paths below the remote's root) and the URL they name."""

    url: str
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
    tagged: Mapping[str, Sequence[Resolved]],
    rs: RemoteStore,
    *,
    url: str,
    resamples: int = 1000,
) -> PublishedSite:
    """Write the site's pages to ``rs`` (module docstring): a page per dataset of ``tagged``
    and per revision its tags name (yanked ones too, in the order their tags were first set);
    ``url`` is where readers reach the remote, named on the pages (``dsreg.open(...,
    remote=URL)``, citations)."""
    files: dict[str, bytes] = {}
    datasets = [_gather(name, tags, rs, resamples) for name, tags in tagged.items()]
    for ds in datasets:
        files.update(_dataset_files(ds, url))
    for path, data in sorted(files.items()):
        rs.write(rs.path(*path.split("/")), data)
    rs.write(rs.path(INDEX), _index(datasets))
    return PublishedSite(
        url=url,
        index=INDEX,
        pages=(*sorted(p for p in files if p.endswith(".html")), INDEX),
        datasets=tuple(ds.name for ds in datasets),
    )


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


def _dataset_files(ds: SiteDataset, url: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for t in ds.tags:
        files.update(tag_files(ds, t, url))
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
            h.esc(f"yanked: {t.yank.reason}" if t.yank else ""),
        ]
        for t in ds.tags
    ]
    parts.append(h.section("Tags", h.table(["Tag", "View", "Rows", "Revision", ""], rows)))
    parts.append(h.section("Leaderboard", _board_table(ds)))
    parts.append(h.section("Pinned views", pins_table(here, ds.pins.values())))
    live = [t for t in ds.tags if t.yank is None]
    head = ""
    if live:
        # The newest tag's document, as its own page holds it.
        data = files[croissant_file(tag_page(ds.name, live[-1].tag))]
        files[croissant_file(here)] = data
        head = h.json_ld(loads(data, what="a Croissant document", error=IntegrityError,
                               max_bytes=len(data)))  # fmt: skip
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
    """Each recorded model's accuracy on each tag, in the tag's own view."""
    if ds.board is None:
        return (
            '<p class="muted">No results recorded: <code>dsreg eval '
            f"{h.esc(ds.name)}@TAG PREDICTIONS --record</code>, then publish again.</p>"
        )
    by_revision = {r["revision"]: r for r in ds.board["revisions"]}
    tags = [t for t in ds.tags if t.info.revision in by_revision]
    headers = ["Model", *(f"{t.tag} ({t.info.view})" for t in tags)]
    rows = [
        [h.esc(name)] + [score_cell(by_revision[t.info.revision], name, t.info.view) for t in tags]
        for name in sorted(ds.board["models"])
    ]
    return h.table(headers, rows, numeric=len(tags))
