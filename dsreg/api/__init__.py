"""The library's porcelain, re-exported by ``dsreg``: one function per ``dsreg`` command, every
type they return, and the errors they raise.

Each function mirrors its command: the command's arguments are positional, its options keywords
of the same names (``--overlay`` is ``overlays=``, a list; ``-r/--remote`` is ``remote=``), and
``registry=`` takes a path, a :class:`~dsreg.registry.folder.Registry` or ``None``. ``None``
means ``$DSREG_REGISTRY``, else ``.dsreg`` here or in a parent folder, else ``$DSREG_HOME``: the
command line finds its registry the same way, in the same place (``Registry.find``). The
command line is built from these signatures (``dsreg.api.options``).

Functions that write the ref log take ``command=``, the line recorded there (default: the
call, e.g. ``dsreg.tag('pets@v1', 'pets@original')``); long ones take ``progress=``, a hook
``progress(task, done, total)``. Nothing here prints or exits.

The block below is the one list of what ``dsreg`` exports. Type checkers read it as imports; at
run time each name is imported from its module when first used (``dsreg._util.lazy``), so that
``import dsreg`` and ``dsreg add`` of an unchanged tree import no numpy, pyarrow, DuckDB or DVC.
A new name is one more ``name as name`` line here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsreg._util.progress import ProgressHook as ProgressHook
    from dsreg._version import __version__ as __version__
    from dsreg.api.audit import audit_duplicates as audit_duplicates
    from dsreg.api.common import find_registry as find_registry
    from dsreg.api.data import connect as connect
    from dsreg.api.data import detect as detect
    from dsreg.api.data import import_labels as import_labels
    from dsreg.api.data import import_votes as import_votes
    from dsreg.api.data import open as open
    from dsreg.api.data import overlay_export as overlay_export
    from dsreg.api.data import overlay_ls as overlay_ls
    from dsreg.api.data import overlay_show as overlay_show
    from dsreg.api.data import sql as sql
    from dsreg.api.marks import retire as retire
    from dsreg.api.marks import yank as yank
    from dsreg.api.registry import add as add
    from dsreg.api.registry import checkout as checkout
    from dsreg.api.registry import gc as gc
    from dsreg.api.registry import init as init
    from dsreg.api.registry import log as log
    from dsreg.api.registry import ls as ls
    from dsreg.api.registry import show as show
    from dsreg.api.registry import tag as tag
    from dsreg.api.registry import untagged_datasets as untagged_datasets
    from dsreg.api.registry import verify as verify
    from dsreg.api.remotes import clone as clone
    from dsreg.api.remotes import import_dvc as import_dvc
    from dsreg.api.remotes import publish as publish
    from dsreg.api.remotes import pull as pull
    from dsreg.api.remotes import push as push
    from dsreg.api.remotes import remote_add as remote_add
    from dsreg.api.remotes import remote_ls as remote_ls
    from dsreg.api.remotes import remote_remove as remote_remove
    from dsreg.api.reports import cite as cite
    from dsreg.api.reports import diff as diff
    from dsreg.api.reports import evaluate as evaluate
    from dsreg.api.reports import export as export
    from dsreg.api.results import cite_result as cite_result
    from dsreg.api.results import gap as gap
    from dsreg.api.results import leaderboard as leaderboard
    from dsreg.api.results import record as record
    from dsreg.api.reviewing import review as review
    from dsreg.api.reviewing import review_export as review_export
    from dsreg.api.reviewing import review_finish as review_finish
    from dsreg.audit.duplicates import AuditResult as AuditResult
    from dsreg.audit.duplicates import Finding as Finding
    from dsreg.detector.detector import Detection as Detection
    from dsreg.errors import AmbiguousDigestError as AmbiguousDigestError
    from dsreg.errors import ConfigError as ConfigError
    from dsreg.errors import CorruptObjectError as CorruptObjectError
    from dsreg.errors import DatasetFormatError as DatasetFormatError
    from dsreg.errors import DsregError as DsregError
    from dsreg.errors import InputPathError as InputPathError
    from dsreg.errors import IntegrityError as IntegrityError
    from dsreg.errors import InvalidInputError as InvalidInputError
    from dsreg.errors import InvalidNameError as InvalidNameError
    from dsreg.errors import InvalidSpecError as InvalidSpecError
    from dsreg.errors import ManifestError as ManifestError
    from dsreg.errors import MissingExtraError as MissingExtraError
    from dsreg.errors import NotFoundError as NotFoundError
    from dsreg.errors import ObjectNotFoundError as ObjectNotFoundError
    from dsreg.errors import PredictionsError as PredictionsError
    from dsreg.errors import ProbabilitiesError as ProbabilitiesError
    from dsreg.errors import QueryError as QueryError
    from dsreg.errors import RegistryNotFoundError as RegistryNotFoundError
    from dsreg.errors import RelabelingError as RelabelingError
    from dsreg.errors import RemoteError as RemoteError
    from dsreg.errors import ReviewConflictError as ReviewConflictError
    from dsreg.errors import RevisionNotFoundError as RevisionNotFoundError
    from dsreg.errors import StorageError as StorageError
    from dsreg.errors import TagExistsError as TagExistsError
    from dsreg.errors import VotesError as VotesError
    from dsreg.errors import YankedWarning as YankedWarning
    from dsreg.formats.manifests import Overlay as Overlay
    from dsreg.formats.manifests import Revision as Revision
    from dsreg.formats.manifests import Snapshot as Snapshot
    from dsreg.ingest.dvc import ImportResult as ImportResult
    from dsreg.ingest.result import AddResult as AddResult
    from dsreg.ops.checkout.apply import CheckoutResult as CheckoutResult
    from dsreg.ops.maintenance import GcResult as GcResult
    from dsreg.ops.maintenance import Problem as Problem
    from dsreg.ops.maintenance import VerifyResult as VerifyResult
    from dsreg.ops.marks import MarkResult as MarkResult
    from dsreg.ops.overlay import OverlayResult as OverlayResult
    from dsreg.ops.tag import TagResult as TagResult
    from dsreg.overlays.create import CreatedOverlay as CreatedOverlay
    from dsreg.overlays.inspect import Issue as Issue
    from dsreg.overlays.inspect import OverlayInfo as OverlayInfo
    from dsreg.registry.folder import Registry as Registry
    from dsreg.registry.reader import OverlayRecord as OverlayRecord
    from dsreg.registry.refs import LogEntry as LogEntry
    from dsreg.registry.refs import RefLog as RefLog
    from dsreg.registry.results import Recorded as Recorded
    from dsreg.registry.results import ResultRecord as ResultRecord
    from dsreg.remote.config import RemoteConfig as RemoteConfig
    from dsreg.remote.transfer import CloneResult as CloneResult
    from dsreg.remote.transfer import PullResult as PullResult
    from dsreg.remote.transfer import PushResult as PushResult
    from dsreg.remote.transfer import RefUpdate as RefUpdate
    from dsreg.report.agreement import Agreement as Agreement
    from dsreg.report.agreement import VerdictPair as VerdictPair
    from dsreg.report.board.cite import ResultCitation as ResultCitation
    from dsreg.report.board.figures import ViewFigures as ViewFigures
    from dsreg.report.board.gap import Gap as Gap
    from dsreg.report.board.gap import GapModel as GapModel
    from dsreg.report.board.leaderboard import Flip as Flip
    from dsreg.report.board.leaderboard import Leaderboard as Leaderboard
    from dsreg.report.board.leaderboard import RevisionBoard as RevisionBoard
    from dsreg.report.board.multitask import ModelAggregate as ModelAggregate
    from dsreg.report.board.multitask import MultitaskBoard as MultitaskBoard
    from dsreg.report.board.multitask import TaskEntry as TaskEntry
    from dsreg.report.board.multitask import ViewBoard as ViewBoard
    from dsreg.report.board.stability import PairChange as PairChange
    from dsreg.report.board.stability import PairHold as PairHold
    from dsreg.report.board.stability import Perturbation as Perturbation
    from dsreg.report.board.stability import Stability as Stability
    from dsreg.report.cite import Citation as Citation
    from dsreg.report.diff import DiffResult as DiffResult
    from dsreg.report.diff import Transition as Transition
    from dsreg.report.evaluate import EvalReport as EvalReport
    from dsreg.report.evaluate import ModelResult as ModelResult
    from dsreg.report.evaluate import ViewScore as ViewScore
    from dsreg.report.human import HumanScore as HumanScore
    from dsreg.report.labelexport import ExportResult as ExportResult
    from dsreg.report.publish.pinned import PinnedView as PinnedView
    from dsreg.report.publish.site import Published as Published
    from dsreg.report.publish.site import PublishedSite as PublishedSite
    from dsreg.report.ranks import PredictionsSource as PredictionsSource
    from dsreg.report.show import ObjectInfo as ObjectInfo
    from dsreg.report.show import RevisionInfo as RevisionInfo
    from dsreg.report.show import TagList as TagList
    from dsreg.report.show import TagRef as TagRef
    from dsreg.report.stats.significance import Significance as Significance
    from dsreg.report.stats.significance import StatsOptions as StatsOptions
    from dsreg.reviewing.logbytes import SetAside as SetAside
    from dsreg.reviewing.queue import ReviewProgress as ReviewProgress
    from dsreg.reviewing.server import ReviewServer as ReviewServer
    from dsreg.reviewing.session import ReviewExport as ReviewExport
    from dsreg.reviewing.session import ReviewFinish as ReviewFinish
    from dsreg.views.dataset import Dataset as Dataset
    from dsreg.views.dataset import Example as Example
    from dsreg.views.questions import QuestionRow as QuestionRow
    from dsreg.views.questions import QuestionSet as QuestionSet
    from dsreg.views.sql import Connection as Connection
else:
    from dsreg._util.lazy import lazy_names

    __getattr__, __dir__ = lazy_names(__name__)
