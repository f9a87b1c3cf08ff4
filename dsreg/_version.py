"""The package version: the single source (pyproject.toml reads it from here at build time).

A literal, not ``importlib.metadata.version("dsreg")``: that lookup scans the installed
distributions and costs every command that needs the version (each ``dsreg add``) about 20 ms,
and a source checkout that is not installed would report a different version from the wheel.
"""

__version__ = "0.1.0"
