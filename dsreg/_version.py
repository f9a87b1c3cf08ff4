"""The package version, from its installed metadata."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dsreg")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
