"""The library's porcelain, re-exported by ``dsreg``: one function per ``dsreg`` command.

Each mirrors its command: the command's arguments are positional, its options keywords of the
same names (``--overlay`` is ``overlays=``, a list; ``-r/--remote`` is ``remote=``), and
``registry=`` takes a path, a :class:`~dsreg.registry.folder.Registry` or ``None``. ``None`` means
``$DSREG_REGISTRY``, else ``.dsreg`` here or in a parent folder, else ``$DSREG_HOME``: the
command line finds its registry the same way, in the same place (``Registry.find``).

Functions that write the ref log take ``command=``, the line recorded there (default: the
call, e.g. ``dsreg.tag('pets@v1', 'pets@original')``); long ones take ``progress=``, a hook
``progress(task, done, total)``. Nothing here prints or exits.

Heavy modules (numpy, pyarrow, DuckDB, DVC) are imported inside the functions that need them:
``dsreg add`` of an unchanged tree answers without any of them.
"""

from __future__ import annotations

from dsreg.api.audit import audit_duplicates
from dsreg.api.common import find_registry
from dsreg.api.data import (
    cite,
    connect,
    detect,
    diff,
    evaluate,
    export,
    import_labels,
    import_votes,
    open,
    overlay_export,
    overlay_ls,
    overlay_show,
    sql,
)
from dsreg.api.registry import (
    add,
    checkout,
    gc,
    init,
    log,
    ls,
    show,
    tag,
    untagged_datasets,
    verify,
)
from dsreg.api.remotes import clone, import_dvc, pull, push, remote_add, remote_ls, remote_remove
from dsreg.api.reviewing import review, review_export, review_finish

__all__ = [
    "add",
    "audit_duplicates",
    "checkout",
    "cite",
    "clone",
    "connect",
    "detect",
    "diff",
    "evaluate",
    "export",
    "find_registry",
    "gc",
    "import_dvc",
    "import_labels",
    "import_votes",
    "init",
    "log",
    "ls",
    "open",
    "overlay_export",
    "overlay_ls",
    "overlay_show",
    "pull",
    "push",
    "remote_add",
    "remote_ls",
    "remote_remove",
    "review",
    "review_export",
    "review_finish",
    "show",
    "sql",
    "tag",
    "untagged_datasets",
    "verify",
]
