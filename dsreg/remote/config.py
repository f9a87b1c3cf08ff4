"""Remote configuration in ``config.toml``, as DVC keeps it: ``[remote.<name>] url = …`` plus
DVC's options for that file system, and ``[core] remote`` naming the default.

URLs and options are checked by DVC's own rules when a remote is added; nothing is contacted.
Secrets never go into ``config.toml``: options that are credentials and URLs holding a password
are refused, and the environment or the cloud SDK's configuration supplies them, as for DVC.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from dsreg._util.records import FieldDict
from dsreg.errors import ConfigError, InvalidInputError
from dsreg.formats.names import check_name
from dsreg.registry.folder import Registry
from dsreg.remote.filesystem import open_filesystem
from dsreg.remote.store import RemoteStore, looks_like_url

__all__ = [
    "RemoteConfig",
    "add_remote",
    "check_options",
    "default_remote",
    "jobs_for",
    "list_remotes",
    "normalize_url",
    "open_remote",
    "parse_options",
    "remote_url",
    "remove_remote",
]

# Options DVC accepts that hold a secret: dsreg keeps none in config.toml.
_SECRETS = frozenset(
    {
        "access_key_id",
        "secret_access_key",
        "session_token",
        "password",
        "passphrase",
        "token",
        "account_key",
        "sas_token",
        "connection_string",
        "client_secret",
        "gdrive_client_secret",
        "oss_key_id",
        "oss_key_secret",
    }
)


# Query-string keys that carry a secret in the URL itself: presigned S3 and GCS URLs, Azure SAS
# tokens, bearer tokens. Matched case-insensitively, with '-' and '_' alike.
_SECRET_QUERY = _SECRETS | {
    "sig",
    "signature",
    "x_amz_signature",
    "x_amz_credential",
    "x_amz_security_token",
    "x_goog_signature",
    "x_goog_credential",
    "access_token",
    "auth",
    "api_key",
    "apikey",
    "key",
    "secret",
    "private_token",
}
# Schemes whose userinfo is a login name, not a secret (DVC's ssh://user@host).
_USER_SCHEMES = frozenset({"ssh", "sftp", "hdfs", "webhdfs"})


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteConfig(FieldDict):
    name: str
    url: str
    options: dict[str, Any] = field(default_factory=dict)
    default: bool = False


def normalize_url(url: str) -> str:
    """A local path made absolute (as DVC resolves it); a URL as given, if it holds no secret."""
    url = url.strip()
    if not url:
        raise InvalidInputError("remote URL is empty; give a folder path or a URL such as s3://…")
    if "://" not in url:
        return os.path.abspath(os.path.expanduser(url))
    parts = urlsplit(url)
    bare = parts._replace(netloc=parts.hostname or "", query="", fragment="").geturl()
    secret = None
    if parts.password:
        secret = "a password"
    elif parts.username and parts.scheme.lower() not in _USER_SCHEMES:
        # https://TOKEN@host: to an HTTP server or an object store, userinfo is a credential.
        secret = "credentials before its host (user@)"
    else:
        keys = [k for k, _v in parse_qsl(parts.query, keep_blank_values=True)]
        found = [k for k in keys if k.lower().replace("-", "_") in _SECRET_QUERY]
        if found:
            secret = f"a secret in its query string ({found[0]!r})"
    if secret is not None:
        raise InvalidInputError(
            f"remote URL {bare!r} holds {secret}; dsreg keeps no secrets in config.toml: give "
            "the URL without it and let the environment or the SDK's configuration supply "
            "credentials"
        )
    return url


def check_options(options: dict[str, Any]) -> dict[str, Any]:
    bad = sorted(k for k in options if k.lower() in _SECRETS)
    if bad:
        raise InvalidInputError(
            f"option {bad[0]!r} is a credential; dsreg keeps no secrets in config.toml: set it "
            "in the environment (e.g. AWS_SECRET_ACCESS_KEY) or the cloud SDK's configuration "
            "(e.g. ~/.aws/credentials with -o profile=NAME)"
        )
    return dict(options)


def parse_options(options: Mapping[str, Any] | Sequence[str] | None) -> dict[str, Any]:
    """DVC remote options: a mapping, or ``KEY=VALUE`` strings as the command line has them
    (``true``/``false`` become booleans, digits integers)."""
    if options is None:
        return {}
    if isinstance(options, Mapping):
        return dict(options)
    opts: dict[str, Any] = {}
    for pair in options:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidInputError(f"--option {pair!r} is not KEY=VALUE")
        v: Any = value
        if value.lower() in ("true", "false"):
            v = value.lower() == "true"
        elif value.isdigit():
            v = int(value)
        opts[key.strip()] = v
    return opts


def list_remotes(reg: Registry) -> list[RemoteConfig]:
    cfg = reg.config
    default = cfg.get("core", {}).get("remote")
    out = []
    for name, conf in sorted(cfg.get("remote", {}).items()):
        opts = {k: v for k, v in conf.items() if k != "url"}
        out.append(RemoteConfig(name=name, url=conf["url"], options=opts, default=name == default))
    return out


def add_remote(
    reg: Registry,
    name: str,
    url: str,
    *,
    options: dict[str, Any] | None = None,
    default: bool = False,
    force: bool = False,
) -> RemoteConfig:
    """Record a remote in config.toml (checked by DVC's own rules; nothing is contacted)."""
    check_name(name, what="remote name")
    url = normalize_url(url)
    opts = check_options(options or {})
    open_filesystem(url, opts)
    cfg = reg.config
    remotes = cfg.setdefault("remote", {})
    if name in remotes and not force:
        raise ConfigError(
            f"remote {name!r} exists ({remotes[name]['url']}); remove it first "
            "('dsreg remote remove') or replace it with --force"
        )
    remotes[name] = {"url": url, **opts}
    if default:
        cfg.setdefault("core", {})["remote"] = name
    reg.write_config(cfg)
    is_default = cfg.get("core", {}).get("remote") == name
    return RemoteConfig(name=name, url=url, options=opts, default=is_default)


def remove_remote(reg: Registry, name: str) -> RemoteConfig:
    cfg = reg.config
    remotes = cfg.get("remote", {})
    if name not in remotes:
        raise ConfigError(f"no remote {name!r}; see 'dsreg remote ls'")
    conf = remotes.pop(name)
    if not remotes:
        cfg.pop("remote")
    core = cfg.get("core", {})
    was_default = core.get("remote") == name
    if was_default:
        core.pop("remote")
    reg.write_config(cfg)
    opts = {k: v for k, v in conf.items() if k != "url"}
    return RemoteConfig(name=name, url=conf["url"], options=opts, default=was_default)


def default_remote(reg: Registry) -> str | None:
    """``[core] remote``, else the only remote configured, else ``None``."""
    cfg = reg.config
    name = cfg.get("core", {}).get("remote")
    if name:
        return str(name)
    remotes = list(cfg.get("remote", {}))
    return remotes[0] if len(remotes) == 1 else None


def open_remote(reg: Registry, remote: str | None = None) -> RemoteStore:
    """A configured remote by name (default: ``default_remote``), or a URL used as given."""
    chosen = _chosen(reg, remote)
    if chosen is None:
        raise ConfigError(
            "no remote given and no default remote; pass -r NAME, or set a default with "
            "'dsreg remote add NAME URL --default'"
        )
    return RemoteStore(name=chosen.name, url=chosen.url, options=chosen.options)


def remote_url(reg: Registry, remote: str | None = None) -> str | None:
    """The URL of ``remote`` (a configured name, or a URL or path used as given; default: the
    default remote), as ``open_remote`` would reach it, without contacting it or importing DVC;
    ``None`` when no remote is given and none is the default."""
    chosen = _chosen(reg, remote)
    return None if chosen is None else chosen.url


def _chosen(reg: Registry, remote: str | None) -> RemoteConfig | None:
    """What ``remote`` names (default: the default remote); ``None`` when none is given and
    none is the default. The one rule telling a remote's name from a folder:

    - a URL or a path (``://``, a ``/``, or a leading ``.``: ``./site``) is that place; if it
      is a configured remote's URL, it is that remote, with its options;
    - a bare word (``site``) is the configured remote of that name; if the current folder
      also holds a folder of that name, the word is ambiguous and refused, naming both and how
      to say which (``./site`` for the folder, the remote's URL for the remote);
    - a bare word that names no remote but a folder here is that folder; naming neither, it
      is refused (``./site`` makes a new folder)."""
    cfg = reg.config.get("remote", {})
    name = remote if remote is not None else default_remote(reg)
    if name is None:
        return None
    if name in cfg:
        options = dict(cfg[name])
        url = str(options.pop("url"))
        if remote is not None and os.path.isdir(name):
            raise ConfigError(
                f"{name!r} names both the remote {name} ({url}) and the folder ./{name}: write "
                f"./{name} for the folder, or {url} for the remote"
            )
        return RemoteConfig(name=name, url=url, options=options)
    if looks_like_url(name) or os.path.isdir(name):
        url = normalize_url(name)
        for known, conf in sorted(cfg.items()):
            if conf["url"] == url:
                return RemoteConfig(
                    name=known, url=url, options={k: v for k, v in conf.items() if k != "url"}
                )
        return RemoteConfig(name=url, url=url)
    raise ConfigError(
        f"no remote {name!r} in this registry; its remotes are "
        f"{', '.join(sorted(cfg)) or '(none)'}: add it with 'dsreg remote add {name} URL', or "
        f"write ./{name} for a folder"
    )


def jobs_for(reg: Registry, rs: RemoteStore, jobs: int | None) -> int:
    if jobs is not None:
        if jobs < 1:
            raise InvalidInputError(f"--jobs must be at least 1, not {jobs}")
        return jobs
    configured = reg.config.get("core", {}).get("jobs")
    return int(configured) if configured else rs.default_jobs()
