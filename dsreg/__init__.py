"""dsreg: a versioned registry for ML evaluation sets.

Every command of the ``dsreg`` CLI is a function here, with the same arguments and options
(``dsreg.add``, ``dsreg.tag``, ``dsreg.checkout``, ``dsreg.push``, …; see :mod:`dsreg.api`), and
every type they return is a name here too.

>>> import dsreg
>>> ds = dsreg.open("cifar10-test@cleaned-v1")   # doctest: +SKIP
>>> ds.digest                                     # the full revision digest: pin and cite it
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsreg._util.pages import numpy_small_pages
from dsreg.errors import (
    AmbiguousDigestError,
    ConfigError,
    CorruptObjectError,
    DatasetFormatError,
    DsregError,
    InputPathError,
    IntegrityError,
    InvalidInputError,
    InvalidNameError,
    InvalidSpecError,
    ManifestError,
    NotFoundError,
    ObjectNotFoundError,
    PredictionsError,
    ProbabilitiesError,
    QueryError,
    RegistryNotFoundError,
    RelabelingError,
    RemoteError,
    ReviewConflictError,
    RevisionNotFoundError,
    StorageError,
    TagExistsError,
    VotesError,
)

# numpy's huge-page advice off for this process, before anything here imports numpy: dsreg's
# large arrays are touched once, and a fresh huge page costs several times what small pages do
# in a VM that returns free memory to its host (dsreg._util.pages; NUMPY_MADVISE_HUGEPAGE, when
# set, is left as it is).
numpy_small_pages()

if TYPE_CHECKING:
    from dsreg._util.progress import ProgressHook
    from dsreg._version import __version__
    from dsreg.api import (
        add,
        audit_duplicates,
        checkout,
        cite,
        clone,
        connect,
        detect,
        diff,
        evaluate,
        export,
        find_registry,
        gc,
        import_dvc,
        import_labels,
        import_votes,
        init,
        log,
        ls,
        open,
        overlay_export,
        overlay_ls,
        overlay_show,
        pull,
        push,
        remote_add,
        remote_ls,
        remote_remove,
        review,
        review_export,
        review_finish,
        show,
        sql,
        tag,
        untagged_datasets,
        verify,
    )
    from dsreg.audit.duplicates import AuditResult, Finding
    from dsreg.detector.detector import Detection
    from dsreg.formats.manifests import Overlay, Revision, Snapshot
    from dsreg.ingest.dvc import ImportResult
    from dsreg.ingest.result import AddResult
    from dsreg.ops.checkout.apply import CheckoutResult
    from dsreg.ops.maintenance import GcResult, Problem, VerifyResult
    from dsreg.ops.overlay import OverlayResult
    from dsreg.ops.tag import TagResult
    from dsreg.overlays.create import CreatedOverlay
    from dsreg.overlays.inspect import Issue, OverlayInfo
    from dsreg.overlays.write import OverlayRecord
    from dsreg.registry.folder import Registry
    from dsreg.registry.refs import LogEntry
    from dsreg.remote.config import RemoteConfig
    from dsreg.remote.transfer import CloneResult, PullResult, PushResult, RefUpdate
    from dsreg.report.agreement import Agreement, VerdictPair
    from dsreg.report.cite import Citation
    from dsreg.report.diff import DiffResult, Transition
    from dsreg.report.evaluate import EvalReport, ModelResult, ViewScore
    from dsreg.report.human import HumanScore
    from dsreg.report.labelexport import ExportResult
    from dsreg.report.ranks import PredictionsSource
    from dsreg.report.show import ObjectInfo, RevisionInfo, TagList, TagRef
    from dsreg.reviewing.logbytes import SetAside
    from dsreg.reviewing.queue import ReviewProgress
    from dsreg.reviewing.server import ReviewServer
    from dsreg.reviewing.session import ReviewExport, ReviewFinish
    from dsreg.views.dataset import Dataset, Example
    from dsreg.views.sql import Connection

# Imported on first use (PEP 562): every ``dsreg`` command imports this package first, and
# pyarrow, DuckDB and the metadata lookup behind __version__ would otherwise cost each command
# a large part of a second before it does anything. ``dsreg.api`` itself is light: it imports
# what a function needs when it is called. Its functions are the names of ``__all__`` that are
# neither errors nor listed here (see below).
_WHERE: dict[str, tuple[str, ...]] = {
    "dsreg._version": ("__version__",),
    "dsreg._util.progress": ("ProgressHook",),
    "dsreg.audit.duplicates": ("AuditResult", "Finding"),
    "dsreg.detector.detector": ("Detection",),
    "dsreg.ingest.dvc": ("ImportResult",),
    "dsreg.ingest.result": ("AddResult",),
    "dsreg.formats.manifests": ("Overlay", "Revision", "Snapshot"),
    "dsreg.ops.checkout.apply": ("CheckoutResult",),
    "dsreg.ops.maintenance": ("GcResult", "Problem", "VerifyResult"),
    "dsreg.ops.overlay": ("OverlayResult",),
    "dsreg.ops.tag": ("TagResult",),
    "dsreg.overlays.create": ("CreatedOverlay",),
    "dsreg.overlays.inspect": ("Issue", "OverlayInfo"),
    "dsreg.overlays.write": ("OverlayRecord",),
    "dsreg.remote.config": ("RemoteConfig",),
    "dsreg.remote.transfer": ("CloneResult", "PullResult", "PushResult", "RefUpdate"),
    "dsreg.registry.refs": ("LogEntry",),
    "dsreg.registry.folder": ("Registry",),
    "dsreg.report.cite": ("Citation",),
    "dsreg.report.agreement": ("Agreement", "VerdictPair"),
    "dsreg.report.diff": ("DiffResult", "Transition"),
    "dsreg.report.evaluate": ("EvalReport", "ModelResult", "ViewScore"),
    "dsreg.report.human": ("HumanScore",),
    "dsreg.report.labelexport": ("ExportResult",),
    "dsreg.report.ranks": ("PredictionsSource",),
    "dsreg.report.show": ("ObjectInfo", "RevisionInfo", "TagList", "TagRef"),
    "dsreg.reviewing.logbytes": ("SetAside",),
    "dsreg.reviewing.queue": ("ReviewProgress",),
    "dsreg.reviewing.server": ("ReviewServer",),
    "dsreg.reviewing.session": ("ReviewExport", "ReviewFinish"),
    "dsreg.views.dataset": ("Dataset", "Example"),
    "dsreg.views.sql": ("Connection",),
}
_LAZY = {name: module for module, names in _WHERE.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dsreg' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AddResult",
    "Agreement",
    "AmbiguousDigestError",
    "AuditResult",
    "CheckoutResult",
    "Citation",
    "CloneResult",
    "ConfigError",
    "Connection",
    "CorruptObjectError",
    "CreatedOverlay",
    "Dataset",
    "DatasetFormatError",
    "Detection",
    "DiffResult",
    "DsregError",
    "EvalReport",
    "Example",
    "ExportResult",
    "Finding",
    "GcResult",
    "HumanScore",
    "ImportResult",
    "InputPathError",
    "IntegrityError",
    "InvalidInputError",
    "InvalidNameError",
    "InvalidSpecError",
    "Issue",
    "LogEntry",
    "ManifestError",
    "ModelResult",
    "NotFoundError",
    "ObjectInfo",
    "ObjectNotFoundError",
    "Overlay",
    "OverlayInfo",
    "OverlayRecord",
    "OverlayResult",
    "PredictionsError",
    "PredictionsSource",
    "ProbabilitiesError",
    "Problem",
    "ProgressHook",
    "PullResult",
    "PushResult",
    "QueryError",
    "RefUpdate",
    "Registry",
    "RegistryNotFoundError",
    "RelabelingError",
    "RemoteConfig",
    "RemoteError",
    "ReviewConflictError",
    "ReviewExport",
    "ReviewFinish",
    "ReviewProgress",
    "ReviewServer",
    "Revision",
    "RevisionInfo",
    "RevisionNotFoundError",
    "SetAside",
    "Snapshot",
    "StorageError",
    "TagExistsError",
    "TagList",
    "TagRef",
    "TagResult",
    "Transition",
    "VerdictPair",
    "VerifyResult",
    "ViewScore",
    "VotesError",
    "__version__",
    "add",
    "audit_duplicates",
    "checkout",
    "cite",
    "clone",
    "connect",
    "detect",
    "diff",
    "evaluate",
    "export",
    "find_registry",
    "gc",
    "import_dvc",
    "import_labels",
    "import_votes",
    "init",
    "log",
    "ls",
    "open",
    "overlay_export",
    "overlay_ls",
    "overlay_show",
    "pull",
    "push",
    "remote_add",
    "remote_ls",
    "remote_remove",
    "review",
    "review_export",
    "review_finish",
    "show",
    "sql",
    "tag",
    "untagged_datasets",
    "verify",
]

# The functions of dsreg.api are written out twice above, as literals on purpose: type checkers
# and IDEs read the TYPE_CHECKING import (their types) and ``__all__`` (what ``dsreg`` exports)
# without running anything, and reading ``dsreg.api.__all__`` here would import dsreg.api on
# ``import dsreg``. The lazy map, read only at run time, takes them from ``__all__``: every
# public name that is neither defined here (the errors) nor listed in _WHERE.
_LAZY.update({name: "dsreg.api" for name in __all__ if name not in _LAZY and name not in globals()})
