"""dsreg: a versioned registry for ML evaluation sets.

>>> import dsreg
>>> ds = dsreg.open("cifar10-test@cleaned-v1")   # doctest: +SKIP
>>> ds.digest                                     # the full revision digest: pin and cite it
"""

from dsreg._version import __version__
from dsreg.api import open
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
from dsreg.registry.dataset import Dataset, Example
from dsreg.registry.manifests import Overlay, Revision, Snapshot
from dsreg.registry.registry import Registry
from dsreg.registry.views import connect
from dsreg.report.evaluate import evaluate

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
    "evaluate",
    "open",
]
