"""Every error dsreg raises, in one tree.

Third-party exceptions (OS, pyarrow, duckdb, dvc) are translated into these at the edge where
they are called, once, so callers catch ``DsregError`` and nothing else. Each error also is the
builtin a Python user would catch for it (as pyarrow's are), and carries its data as attributes
(``None`` where the raise site did not know it)::

    DsregError
    ├── InvalidInputError  ValueError  bad input from the user; nothing was written
    │   ├── InvalidNameError           a dataset or tag name outside [a-z0-9][a-z0-9._-]{0,63}
    │   ├── InvalidSpecError           a ``dataset@revision`` spec that does not parse
    │   ├── InputPathError  FileNotFoundError  a path that is missing, or unsafe (``..``, …)
    │   ├── DatasetFormatError         a source table or tree that cannot become a snapshot
    │   ├── ProbabilitiesError         predicted probabilities of the wrong shape or values
    │   ├── VotesError                 validation votes that cannot become an overlay
    │   ├── RelabelingError            a relabeling (ReaL, counts, csv) that cannot become one
    │   ├── ReviewConflictError        a review answer the queue cannot take (voted already, …)
    │   ├── PredictionsError           model predictions that do not fit a revision
    │   └── QueryError                 a SQL query that DuckDB refused (its message included)
    ├── NotFoundError  LookupError
    │   ├── RegistryNotFoundError  FileNotFoundError  no registry at or above the working folder
    │   ├── RevisionNotFoundError      no such dataset, tag or digest
    │   └── ObjectNotFoundError        a digest the store does not hold
    ├── AmbiguousDigestError  LookupError  a digest prefix matching several objects
    ├── TagExistsError  ValueError     a tag that exists, moved without ``force``
    ├── IntegrityError  OSError        stored content that is not what its digest or schema says
    │   ├── CorruptObjectError         bytes that do not hash to their digest: never served
    │   └── ManifestError              a manifest that breaks its JSON Schema or the data model
    ├── ConfigError  ValueError        a config.toml that cannot be read or an invalid setting
    ├── RemoteError  OSError           a remote that cannot be reached, read or written
    ├── StorageError  OSError          the local file system refused an operation
    └── MissingExtraError  ImportError a command or method whose optional extra is not installed

>>> try:
...     dsreg.open("imagenet-val@nope")               # doctest: +SKIP
... except LookupError as e:
...     print(e.dataset, e.ref)
imagenet-val nope
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "AmbiguousDigestError",
    "ConfigError",
    "CorruptObjectError",
    "DatasetFormatError",
    "DsregError",
    "InputPathError",
    "IntegrityError",
    "InvalidInputError",
    "InvalidNameError",
    "InvalidSpecError",
    "ManifestError",
    "MissingExtraError",
    "NotFoundError",
    "ObjectNotFoundError",
    "PredictionsError",
    "ProbabilitiesError",
    "QueryError",
    "RegistryNotFoundError",
    "RelabelingError",
    "RemoteError",
    "ReviewConflictError",
    "RevisionNotFoundError",
    "StorageError",
    "TagExistsError",
    "VotesError",
]

# Attributes are keywords with defaults, so ``raise XError("message")`` stays valid, and the
# message stays the only positional argument: pickling (worker processes) rebuilds an error
# from ``args`` and then restores the attributes from its ``__dict__``. Each class declares its
# attributes as annotated class fields defaulting to ``None``; the base's ``__init__`` takes
# them by keyword and refuses a name that no class of the error declares.


def _declared(cls: type) -> set[str]:
    return {name for c in cls.__mro__ for name in vars(c).get("__annotations__", {})}


class DsregError(Exception):
    """Base of every error dsreg raises; the message says what was wrong and what to do."""

    def __init__(self, message: str = "", **attributes: object) -> None:
        super().__init__(message)
        unknown = sorted(set(attributes) - _declared(type(self)))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no attribute {', '.join(unknown)}")
        for name, value in attributes.items():
            setattr(self, name, value)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class _PathAttribute(DsregError):
    """Base of the errors whose one attribute is ``path`` (the file or folder, where known)."""

    path: str | None = None


class InvalidInputError(DsregError, ValueError):
    """Input from the user that dsreg refuses; nothing was written."""


class InvalidNameError(InvalidInputError):
    """A dataset or tag name that does not match ``[a-z0-9][a-z0-9._-]{0,63}``.

    Attributes: ``name`` (the value refused), ``what`` (``"dataset name"``, ``"tag name"``, …).
    """

    name: str | None = None
    what: str | None = None


class InvalidSpecError(InvalidInputError):
    """A revision spec other than ``dataset@tag``, ``dataset@<prefix>`` or ``blake3:<hex>``.

    Attributes: ``spec``.
    """

    spec: str | None = None


class InputPathError(_PathAttribute, InvalidInputError, FileNotFoundError):
    """A path that does not exist, or is unsafe: ``..``, absolute, or a link out of its tree.

    Attributes: ``path``.
    """


class DatasetFormatError(_PathAttribute, InvalidInputError):
    """A source (folder tree, label file, table) that cannot become a snapshot.

    Attributes: ``path`` (the source, where known).
    """


class ProbabilitiesError(InvalidInputError):
    """Predicted probabilities with the wrong shape, row count or values.

    Attributes: ``expected``, ``actual`` (e.g. row counts, where the check compared two).
    """

    expected: object = None
    actual: object = None


class VotesError(_PathAttribute, InvalidInputError):
    """Human validation votes that cannot become an overlay of the named snapshot.

    Attributes: ``path`` (the votes file, where known).
    """


class RelabelingError(InvalidInputError):
    """A published relabeling (ImageNet-ReaL lists, rater counts) or a corrections CSV that
    cannot become an overlay of the named snapshot."""


class ReviewConflictError(InvalidInputError):
    """A review answer that the queue cannot take in its present state: the reviewer answered
    the item already, the item has its votes already, or there is nothing to undo."""


class PredictionsError(InvalidInputError):
    """Model predictions that do not fit the revision they are scored against.

    Attributes: ``model`` (its name, where known).
    """

    model: str | None = None


class QueryError(InvalidInputError):
    """A SQL query that DuckDB refused (syntax, unknown table or column, …); DuckDB's message.

    Attributes: ``query``.
    """

    query: str | None = None


class NotFoundError(DsregError, LookupError):
    """Something named does not exist."""


class RegistryNotFoundError(_PathAttribute, NotFoundError, FileNotFoundError):
    """No registry at ``registry=``/``--registry``, ``$DSREG_REGISTRY``, above the working
    directory, or at ``$DSREG_HOME``.

    Attributes: ``path`` (the folder looked at, when one was named; else the working folder).
    """


class RevisionNotFoundError(NotFoundError):
    """A dataset, tag or digest that resolves to no revision.

    Attributes: ``dataset``, ``ref`` (the tag or digest prefix asked for).
    """

    dataset: str | None = None
    ref: str | None = None


class ObjectNotFoundError(NotFoundError):
    """A digest whose object the store does not hold.

    Attributes: ``digest`` (full, or the prefix given).
    """

    digest: str | None = None


class AmbiguousDigestError(DsregError, LookupError):
    """A digest prefix that matches several objects; the message lists the candidates.

    Attributes: ``prefix``, ``candidates`` (full digests).
    """

    def __init__(
        self, message: str = "", *, prefix: str | None = None, candidates: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.prefix = prefix
        self.candidates = tuple(candidates)


class TagExistsError(DsregError, ValueError):
    """A tag that already exists with another digest; moving it needs ``force``.

    Attributes: ``dataset``, ``tag``, ``existing`` (the digest it holds), ``new`` (the digest
    refused).
    """

    dataset: str | None = None
    tag: str | None = None
    existing: str | None = None
    new: str | None = None


class IntegrityError(DsregError, OSError):
    """Stored content that is not what its digest or its schema says.

    Attributes: ``digest`` (the object, where known).
    """

    digest: str | None = None


class CorruptObjectError(IntegrityError):
    """An object whose bytes do not hash to its digest. dsreg never serves such bytes.

    Attributes: ``digest`` (expected), ``actual`` (what the bytes hash to, where computed),
    ``path`` (the stored file).
    """

    path: str | None = None
    actual: str | None = None


class ManifestError(IntegrityError):
    """A manifest that breaks its JSON Schema or the data model.

    Attributes: ``digest`` (the manifest, where known).
    """


class ConfigError(_PathAttribute, DsregError, ValueError):
    """A config.toml that cannot be read, or a setting with an invalid value.

    Attributes: ``path`` (the file, where known).
    """


class RemoteError(DsregError, OSError):
    """A remote that cannot be reached, read or written.

    Attributes: ``remote`` (its name or URL, where known).
    """

    remote: str | None = None


class StorageError(_PathAttribute, DsregError, OSError):
    """The local file system refused an operation (permissions, disk full, …).

    Attributes: ``path`` (where known).
    """


class MissingExtraError(DsregError, ImportError):
    """A command, option or method whose optional dependencies (an extra of the package, as
    ``dsreg[review]``) are not installed; nothing was written. The message names the install
    command.

    Attributes: ``extra`` (the extra's name).
    """

    extra: str | None = None


class YankedWarning(UserWarning):
    """Not an error: a yanked tag, or a tag of a retired dataset, was resolved. The message
    holds the reason, and the successor to use (the CLI prints it as one line on stderr)."""
