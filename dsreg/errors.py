"""Every error dsreg raises, in one tree.

Third-party exceptions (OS, pyarrow, duckdb, dvc) are translated into these at the edge where
they are called, once, so callers catch ``DsregError`` and nothing else::

    DsregError
    ├── InvalidInputError          bad input from the user; nothing was written
    │   ├── InvalidNameError       a dataset or tag name outside [a-z0-9][a-z0-9._-]{0,63}
    │   ├── InvalidSpecError       a ``dataset@revision`` spec that does not parse
    │   ├── InputPathError         a path that is missing, or unsafe (``..``, absolute, escaping)
    │   ├── DatasetFormatError     a source table or tree that cannot become a snapshot
    │   ├── ProbabilitiesError     predicted probabilities of the wrong shape or values
    │   ├── VotesError             validation votes that cannot become an overlay
    │   ├── PredictionsError       model predictions that do not fit a revision
    │   └── QueryError             a SQL query that DuckDB refused (its message included)
    ├── NotFoundError
    │   ├── RegistryNotFoundError  no registry at or above the working directory
    │   ├── RevisionNotFoundError  no such dataset, tag or digest
    │   └── ObjectNotFoundError    a digest the store does not hold
    ├── AmbiguousDigestError       a digest prefix matching several objects
    ├── TagExistsError             a tag that exists, moved without ``force``
    ├── IntegrityError             stored content that is not what its digest or schema says
    │   ├── CorruptObjectError     bytes that do not hash to their digest: never served
    │   └── ManifestError          a manifest that breaks its JSON Schema or the data model
    ├── ConfigError                a config.toml that cannot be read or a setting that is invalid
    ├── RemoteError                a remote that cannot be reached, read or written
    └── StorageError               the local file system refused an operation
"""

from __future__ import annotations

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
    "NotFoundError",
    "ObjectNotFoundError",
    "PredictionsError",
    "ProbabilitiesError",
    "QueryError",
    "RegistryNotFoundError",
    "RemoteError",
    "RevisionNotFoundError",
    "StorageError",
    "TagExistsError",
    "VotesError",
]


class DsregError(Exception):
    """Base of every error dsreg raises; the message says what was wrong and what to do."""


class InvalidInputError(DsregError):
    """Input from the user that dsreg refuses; nothing was written."""


class InvalidNameError(InvalidInputError):
    """A dataset or tag name that does not match ``[a-z0-9][a-z0-9._-]{0,63}``."""


class InvalidSpecError(InvalidInputError):
    """A revision spec other than ``dataset@tag``, ``dataset@<prefix>`` or ``blake3:<hex>``."""


class InputPathError(InvalidInputError):
    """A path that does not exist, or is unsafe: ``..``, absolute, or a link out of its tree."""


class DatasetFormatError(InvalidInputError):
    """A source (folder tree, label file, table) that cannot become a snapshot."""


class ProbabilitiesError(InvalidInputError):
    """Predicted probabilities with the wrong shape, row count or values."""


class VotesError(InvalidInputError):
    """Human validation votes that cannot become an overlay of the named snapshot."""


class PredictionsError(InvalidInputError):
    """Model predictions that do not fit the revision they are scored against."""


class QueryError(InvalidInputError):
    """A SQL query that DuckDB refused (syntax, unknown table or column, …); DuckDB's message."""


class NotFoundError(DsregError):
    """Something named does not exist."""


class RegistryNotFoundError(NotFoundError):
    """No registry at ``--registry``, above the working directory, or at ``$DSREG_HOME``."""


class RevisionNotFoundError(NotFoundError):
    """A dataset, tag or digest that resolves to no revision."""


class ObjectNotFoundError(NotFoundError):
    """A digest whose object the store does not hold."""


class AmbiguousDigestError(DsregError):
    """A digest prefix that matches several objects; the message lists the candidates."""


class TagExistsError(DsregError):
    """A tag that already exists with another digest; moving it needs ``force``."""


class IntegrityError(DsregError):
    """Stored content that is not what its digest or its schema says."""


class CorruptObjectError(IntegrityError):
    """An object whose bytes do not hash to its digest. dsreg never serves such bytes."""


class ManifestError(IntegrityError):
    """A manifest that breaks its JSON Schema or the data model."""


class ConfigError(DsregError):
    """A config.toml that cannot be read, or a setting with an invalid value."""


class RemoteError(DsregError):
    """A remote that cannot be reached, read or written."""


class StorageError(DsregError):
    """The local file system refused an operation (permissions, disk full, …)."""
