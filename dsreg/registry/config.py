"""``config.toml``: remotes and settings, in DVC's spirit (URL and options here; secrets in the
environment or the cloud SDK's own configuration, never in this file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsreg._util.fs import write_atomic
from dsreg._util.lazy import lazy_imports
from dsreg.errors import ConfigError, ManifestError
from dsreg.formats.schemas import validate

# Every registry imports this module; only commands that read or write config.toml (remotes,
# checkout's link setting, init) need a TOML parser or writer.
with lazy_imports():
    import tomllib

    import tomli_w

__all__ = ["read_config", "write_config"]


def read_config(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"cannot read {path}: {e}; fix or remove the file") from e
    except RecursionError as e:  # tomllib recurses once per nested array or inline table
        raise ConfigError(
            f"cannot read {path}: it nests arrays or tables too deeply; fix or remove the file"
        ) from e
    try:
        validate(data, "config", what=str(path))
    except ManifestError as e:
        raise ConfigError(f"{e}; fix the file") from None
    return data


def write_config(path: Path, data: dict[str, Any]) -> None:
    try:
        validate(data, "config", what="the new configuration")
    except ManifestError as e:
        raise ConfigError(str(e)) from None
    try:
        write_atomic(path, tomli_w.dumps(data).encode("utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror}") from e
