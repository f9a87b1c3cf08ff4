"""dsreg: a versioned registry for ML evaluation sets.

>>> import dsreg
>>> ds = dsreg.open("cifar10-test@cleaned-v1")   # doctest: +SKIP
>>> ds.digest                                     # the full revision digest: pin and cite it
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    RemoteError,
    RevisionNotFoundError,
    StorageError,
    TagExistsError,
    VotesError,
)

if TYPE_CHECKING:
    from dsreg._version import __version__
    from dsreg.api import detect, import_votes, open
    from dsreg.model.manifests import Overlay, Revision, Snapshot
    from dsreg.repo.registry import Registry
    from dsreg.report.evaluate import evaluate
    from dsreg.views.dataset import Dataset, Example
    from dsreg.views.sql import connect

# Imported on first use (PEP 562): every ``dsreg`` command imports this package first, and
# pyarrow, DuckDB and the metadata lookup behind __version__ would otherwise cost each command
# a large part of a second before it does anything.
_LAZY = {
    "__version__": "dsreg._version",
    "open": "dsreg.api",
    "detect": "dsreg.api",
    "import_votes": "dsreg.api",
    "Dataset": "dsreg.views.dataset",
    "Example": "dsreg.views.dataset",
    "Overlay": "dsreg.model.manifests",
    "Revision": "dsreg.model.manifests",
    "Snapshot": "dsreg.model.manifests",
    "Registry": "dsreg.repo.registry",
    "connect": "dsreg.views.sql",
    "evaluate": "dsreg.report.evaluate",
}


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
    "AmbiguousDigestError",
    "ConfigError",
    "CorruptObjectError",
    "Dataset",
    "DatasetFormatError",
    "DsregError",
    "Example",
    "InputPathError",
    "IntegrityError",
    "InvalidInputError",
    "InvalidNameError",
    "InvalidSpecError",
    "ManifestError",
    "NotFoundError",
    "ObjectNotFoundError",
    "Overlay",
    "PredictionsError",
    "ProbabilitiesError",
    "QueryError",
    "Registry",
    "RegistryNotFoundError",
    "RemoteError",
    "Revision",
    "RevisionNotFoundError",
    "Snapshot",
    "StorageError",
    "TagExistsError",
    "VotesError",
    "__version__",
    "connect",
    "detect",
    "evaluate",
    "import_votes",
    "open",
]
