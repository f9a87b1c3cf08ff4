"""The modules the API functions call that must stay off a light path, in one place.

Each of them imports numpy, pyarrow, DuckDB, matplotlib, fsspec, DVC or the review server, and
``import dsreg``, ``dsreg tag`` or a re-add of an unchanged tree must import none of those. So
each is bound here once as :func:`~dsreg._util.lazy.lazy_module` (imported on its first use,
read by type checkers as the plain import), and the API modules import the handles from here::

    from dsreg.api._modules import checkout_ops

What a module of the API needs only for its annotations it imports itself, under its own
``if TYPE_CHECKING:``.

Why each stays off the light path: the overlays, reports and views import numpy and pyarrow
(DuckDB, matplotlib); the checkout and the maintenance walk import numpy and pyarrow, which the
add of a tree must not; a remote is reached through fsspec and DVC, and an import from DVC
through DVC itself; the review reads its queue with pyarrow and serves it with Starlette and
uvicorn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsreg._util.lazy import lazy_module

__all__ = [
    "checkout_ops",
    "ingest_add",
    "ingest_dvc",
    "labelexport",
    "maintenance",
    "overlay_inspect",
    "overlay_ops",
    "overlay_write",
    "remote_config",
    "remote_reading",
    "report_cite",
    "report_diff",
    "report_evaluate",
    "report_export",
    "report_plot",
    "report_show",
    "review_queue",
    "review_server",
    "review_session",
    "transfer",
    "views_dataset",
    "views_sql",
]

if TYPE_CHECKING:
    from dsreg.ingest import add as ingest_add
    from dsreg.ingest import dvc as ingest_dvc
    from dsreg.ops import maintenance
    from dsreg.ops import overlay as overlay_ops
    from dsreg.ops.checkout import apply as checkout_ops
    from dsreg.overlays import inspect as overlay_inspect
    from dsreg.overlays import write as overlay_write
    from dsreg.remote import config as remote_config
    from dsreg.remote import read as remote_reading
    from dsreg.remote import transfer
    from dsreg.report import cite as report_cite
    from dsreg.report import diff as report_diff
    from dsreg.report import evaluate as report_evaluate
    from dsreg.report import export as report_export
    from dsreg.report import labelexport
    from dsreg.report import plot as report_plot
    from dsreg.report import show as report_show
    from dsreg.reviewing import queue as review_queue
    from dsreg.reviewing import server as review_server
    from dsreg.reviewing import session as review_session
    from dsreg.views import dataset as views_dataset
    from dsreg.views import sql as views_sql
else:
    ingest_add = lazy_module("dsreg.ingest.add")
    ingest_dvc = lazy_module("dsreg.ingest.dvc")
    maintenance = lazy_module("dsreg.ops.maintenance")
    overlay_ops = lazy_module("dsreg.ops.overlay")
    checkout_ops = lazy_module("dsreg.ops.checkout.apply")
    overlay_inspect = lazy_module("dsreg.overlays.inspect")
    overlay_write = lazy_module("dsreg.overlays.write")
    remote_config = lazy_module("dsreg.remote.config")
    remote_reading = lazy_module("dsreg.remote.read")
    transfer = lazy_module("dsreg.remote.transfer")
    report_cite = lazy_module("dsreg.report.cite")
    report_diff = lazy_module("dsreg.report.diff")
    report_evaluate = lazy_module("dsreg.report.evaluate")
    report_export = lazy_module("dsreg.report.export")
    labelexport = lazy_module("dsreg.report.labelexport")
    report_plot = lazy_module("dsreg.report.plot")
    report_show = lazy_module("dsreg.report.show")
    review_queue = lazy_module("dsreg.reviewing.queue")
    review_server = lazy_module("dsreg.reviewing.server")
    review_session = lazy_module("dsreg.reviewing.session")
    views_dataset = lazy_module("dsreg.views.dataset")
    views_sql = lazy_module("dsreg.views.sql")
