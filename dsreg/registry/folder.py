"""The registry: a folder holding objects, refs, logs and config (docs/concepts.md, "Registry
folders")."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from dsreg._util.lazy import lazy_imports
from dsreg.errors import (
    InvalidInputError,
    ManifestError,
    ObjectNotFoundError,
    RegistryNotFoundError,
    StorageError,
)
from dsreg.formats.manifests import (
    Manifest,
    Overlay,
    Revision,
    Snapshot,
    canonical_manifest,
    decode_manifest,
    encode_manifest,
)
from dsreg.formats.names import parse_spec
from dsreg.objects.digest import PREFIX, short
from dsreg.objects.hashing import hash_bytes
from dsreg.objects.store import ObjectStore
from dsreg.registry.refs import RefStore
from dsreg.registry.schemamemo import SchemaMemo

# The stat cache (and SQLite with it) serves adds, checkouts and gc; a tag, a show or a read
# never opens it. The marks are read only for a tag that has one in place (may_be_marked), and
# config.toml only by the commands that take a setting from it.
with lazy_imports():
    from dsreg.registry import config as registry_config
    from dsreg.registry import state as registry_state

if TYPE_CHECKING:
    from dsreg.registry.state import StatCache

__all__ = ["DIRNAME", "ENV_CACHE", "ENV_REGISTRY", "Registry", "cache_root"]

DIRNAME = ".dsreg"
# Names a registry for every command and every library call that is given none.
ENV_REGISTRY = "DSREG_REGISTRY"
# Names the per-user cache registry that reading from a remote uses where there is no registry.
ENV_CACHE = "DSREG_CACHE"
_MARKER = "config.toml"
# The first key of each manifest kind in canonical (RFC 8785, sorted-key) form: snapshot,
# overlay, revision.
_MANIFEST_HEADS = (b'{"classes":[', b'{"base":"blake3:', b'{"overlays":[')
_HEAD_LEN = max(len(h) for h in _MANIFEST_HEADS)
_M = TypeVar("_M", Snapshot, Overlay, Revision)


class Registry:
    """One registry folder. ``Registry.find()`` locates it; ``Registry.init()`` makes one."""

    __slots__ = ("_state", "refs", "root", "schema_memo", "store")

    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = ObjectStore(root)
        self.refs = RefStore(root)
        self.schema_memo = SchemaMemo(root)
        self._state: StatCache | None = None

    @property
    def state(self) -> StatCache:
        """The stat cache (``state/stat.sqlite``), made on first use."""
        if self._state is None:
            self._state = registry_state.StatCache(self.root)
        return self._state

    def __repr__(self) -> str:
        return f"Registry({str(self.root)!r})"

    # -- locating ---------------------------------------------------------------------------
    @classmethod
    def init(cls, path: str | os.PathLike[str] | None = None) -> Registry:
        """Create a registry at ``path`` (else ``$DSREG_REGISTRY``, else ``$DSREG_HOME``, else
        ``./.dsreg``); idempotent."""
        if path is None:
            # An empty variable counts as unset, as the shell (and click) treat it.
            env = os.environ.get(ENV_REGISTRY) or os.environ.get("DSREG_HOME")
            path = env if env else Path.cwd() / DIRNAME
        root = Path(path).absolute()
        if root.exists() and not root.is_dir():
            raise StorageError(f"{root} exists and is not a folder; choose another --registry")
        try:
            for sub in ("files", "refs", "logs", "tmp"):
                (root / sub).mkdir(parents=True, exist_ok=True)
            if not (root / _MARKER).exists():
                # Copies (or copy-on-write clones) by default: a hard link would let an edit of
                # a checked-out file corrupt the store (DVC's default is "reflink,copy" too).
                registry_config.write_config(root / _MARKER, {"core": {"checkout_link": "reflink"}})
        except OSError as e:
            raise StorageError(f"cannot create a registry at {root}: {e.strerror}") from e
        return cls(root)

    @classmethod
    def find(cls, path: str | os.PathLike[str] | None = None) -> Registry:
        """``path`` if given; else ``$DSREG_REGISTRY``; else ``.dsreg`` here or in a parent
        folder; else ``$DSREG_HOME``. The one place a registry is found: the command line and
        every library function (``registry=None``) come here."""
        if path is None:
            path = os.environ.get(ENV_REGISTRY) or None
        if path is not None:
            root = Path(path).absolute()
            if not (root / _MARKER).is_file():
                raise RegistryNotFoundError(
                    f"{root} is not a dsreg registry (no {_MARKER}); create one with "
                    f"'dsreg init --registry {path}'",
                    path=str(root),
                )
            return cls(root)
        here = Path.cwd()
        for d in (here, *here.parents):
            if (d / DIRNAME / _MARKER).is_file():
                return cls(d / DIRNAME)
        env = os.environ.get("DSREG_HOME")
        if env and (Path(env) / _MARKER).is_file():
            return cls(Path(env).absolute())
        raise RegistryNotFoundError(
            f"no registry: none at {here / DIRNAME} or above, and $DSREG_HOME is "
            f"{'unset' if not env else repr(env) + ' (not a registry)'}; run 'dsreg init' "
            "or pass --registry PATH",
            path=str(here),
        )

    @classmethod
    def cache(cls) -> Registry:
        """The per-user cache registry (``cache_root()``), made on first use: where objects
        read from a remote go on a machine with no registry of its own."""
        return cls.init(cache_root())

    # -- config -----------------------------------------------------------------------------
    @property
    def config(self) -> dict[str, Any]:
        return registry_config.read_config(self.root / _MARKER)

    def write_config(self, data: dict[str, Any]) -> None:
        registry_config.write_config(self.root / _MARKER, data)

    # -- locking ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, *, exclusive: bool = False) -> Iterator[None]:
        """Writers hold it shared; gc holds it exclusive, so it never races an add."""
        path = self.root / "lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StorageError(
                f"cannot open the registry's lock file {path}: {e.strerror}; it must be a "
                "plain file: remove whatever is there (no dsreg command may be running)"
            ) from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            # Closing releases the lock whatever close() reports, and nothing was written
            # through this descriptor: a failing close must not turn a finished write (a tag
            # and its log line, already durable) into a reported failure.
            with contextlib.suppress(OSError):
                os.close(fd)

    # -- manifests --------------------------------------------------------------------------
    def put_manifest(self, m: Manifest) -> str:
        data, digest, checked = self._encode(m)
        if not checked:
            # The bytes themselves, hashed to ``digest``, pass the check a read makes.
            decode_manifest(data, digest=digest)
        stored = self.store.put_bytes(data)
        if not checked:
            self.schema_memo.remember(digest)
        return stored

    def digest_of(self, m: Manifest) -> str:
        """``m``'s digest, checked against its schema unless its bytes passed it before."""
        return self._encode(m)[1]

    def _encode(self, m: Manifest) -> tuple[bytes, str, bool]:
        """``m``'s canonical bytes, their digest, and whether their schema check is
        remembered; ``m`` is checked against its schema (``encode_manifest``) if not."""
        data = canonical_manifest(m)
        digest = hash_bytes(data)
        checked = self.schema_memo.checked(digest)
        if not checked:
            encode_manifest(m)
        return data, digest, checked

    def manifest(self, digest: str, *, recheck: bool = False) -> Manifest:
        """A stored manifest, re-hashed and validated against its schema.

        The bytes are re-hashed on every read; the schema check is skipped for a digest whose
        verified bytes passed it before (``dsreg.registry.schemamemo``), unless ``recheck``
        (``dsreg verify`` trusts no memo), and remembered only after they pass it here."""
        data = self.store.read_bytes(digest)  # raises unless the bytes hash to ``digest``
        checked = not recheck and self.schema_memo.checked(digest)
        m = decode_manifest(data, digest=digest, schema_checked=checked)
        if not checked:
            self.schema_memo.remember(digest)
        return m

    def snapshot(self, digest: str) -> Snapshot:
        return _expect(self.manifest(digest), Snapshot, digest)

    def overlay(self, digest: str) -> Overlay:
        return _expect(self.manifest(digest), Overlay, digest)

    def revision(self, digest: str) -> Revision:
        """A revision by digest; a snapshot digest stands for its ``original`` revision."""
        m = self.manifest(digest)
        if isinstance(m, Snapshot):
            return Revision(snapshot=digest)
        return _expect(m, Revision, digest)

    def manifest_kind(self, digest: str) -> str | None:
        """``"snapshot"``, ``"overlay"`` or ``"revision"`` for a stored manifest (by its first
        bytes, as ``is_manifest``); ``None`` for anything else, or an object not here."""
        try:
            with open(self.store.path(digest), "rb") as f:
                head = f.read(_HEAD_LEN)
        except OSError:
            return None
        for kind, h in zip(("snapshot", "overlay", "revision"), _MANIFEST_HEADS, strict=True):
            if head.startswith(h):
                return kind
        return None

    def is_manifest(self, digest: str) -> bool:
        """Whether a stored object is a manifest (read the first bytes only).

        Manifests are stored canonical, keys sorted, so each kind has a fixed first key; a
        payload that merely is JSON (a dataset of ``.json`` documents) is not taken for one.
        """
        try:
            with open(self.store.path(digest), "rb") as f:
                head = f.read(_HEAD_LEN)
        except OSError:
            return False
        return head.startswith(_MANIFEST_HEADS)

    def resolve_object(self, text: str) -> str:
        """A full digest from a full digest or an unambiguous prefix (>= 6 hex) of any object."""
        text = text.strip()
        if len(text.removeprefix(PREFIX)) == 64:
            d = text if text.startswith(PREFIX) else PREFIX + text
            parse_spec(d)
            if not self.store.has(d):
                raise ObjectNotFoundError(f"no object {short(d)} in this registry", digest=d)
            return d
        return self.store.resolve_prefix(text)

    def dataset_of(self, rev: Revision) -> str:
        return self.snapshot(rev.snapshot).dataset

    def store_revision(self, rev: Revision) -> str:
        """Store a revision manifest, checking that its parts exist and fit together."""
        snap = self.snapshot(rev.snapshot)
        for od in rev.overlays:
            ov = self.overlay(od)
            if ov.base != rev.snapshot:
                raise InvalidInputError(
                    f"overlay {short(od)} corrects snapshot {short(ov.base)}, not "
                    f"{short(rev.snapshot)} ({snap.dataset}); an overlay applies to its own "
                    "snapshot only"
                )
        return self.put_manifest(rev)


def cache_root() -> Path:
    """``$DSREG_CACHE``, else ``$XDG_CACHE_HOME/dsreg``, else ``~/.cache/dsreg`` (a relative
    ``XDG_CACHE_HOME`` is ignored, as the XDG base directory specification says)."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "dsreg"


def _expect(m: Manifest, cls: type[_M], digest: str) -> _M:
    if not isinstance(m, cls):
        kind = type(m).__name__.lower()
        raise ManifestError(
            f"object {short(digest)} is a {kind}, not a {cls.__name__.lower()}; "
            "check the digest you gave"
        )
    return m
