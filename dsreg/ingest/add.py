"""``dsreg add`` from any source: an ImageFolder tree, a label file or a table of examples.

The tree's path stays light (no numpy, pyarrow or schema validator) until it must store
something: re-adding an unchanged tree is answered from the scan (``tree.py``).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import InputPathError, InvalidInputError
from dsreg.ingest.result import AddResult, AddTarget
from dsreg.registry.folder import Registry

__all__ = ["add", "check_sources", "read_credit"]

PathArg = str | os.PathLike[str]


def check_sources(
    path: PathArg | None,
    *,
    labels: PathArg | None,
    table: PathArg | None,
    files: PathArg | None,
    classes: object,
    ids: PathArg | None = None,
) -> None:
    """Refuse a request that names no source, several, or options that do not go with it."""
    if sum(x is not None for x in (path, labels, table)) != 1:
        raise InvalidInputError(
            "give exactly one source: a folder PATH (ImageFolder), --labels FILE or --table FILE"
        )
    if files is not None and table is None:
        raise InvalidInputError("--files goes with --table; an ImageFolder tree holds its files")
    if ids is not None and labels is None:
        raise InvalidInputError(
            "--ids goes with --labels; a --table names its ids in a column, a folder by its paths"
        )
    if path is not None and classes is not None:
        raise InvalidInputError("--classes goes with --labels or --table; folders name classes")


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    # Tens of thousands of small records and no cycles among them: the cyclic collector would
    # only walk them, again and again, while they are built.
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def add(
    reg: Registry,
    dataset: str,
    path: PathArg | None = None,
    *,
    labels: PathArg | None = None,
    table: PathArg | None = None,
    id_column: str = "example_id",
    label_column: str = "label",
    files: PathArg | None = None,
    classes: PathArg | Sequence[str] | None = None,
    ids: PathArg | None = None,
    tag: str | None = None,
    force: bool = False,
    citation: PathArg | None = None,
    credit: str | None = None,
    progress: ProgressHook = no_progress,
    command: str = "",
    allow_lookalike_ids: bool = False,
) -> AddResult:
    """Store one source as a snapshot of ``dataset`` (see ``dsreg.add``)."""
    check_sources(path, labels=labels, table=table, files=files, classes=classes, ids=ids)
    target = AddTarget(
        dataset=dataset,
        tag=tag,
        force=force,
        command=command,
        extra_provenance=read_credit(citation, credit),
    )
    if path is not None:
        from dsreg.ingest.tree import add_tree
        from dsreg.ingest.treescan import scan_tree

        with _no_cyclic_gc():
            scan = scan_tree(Path(path))
            return add_tree(
                reg, target, scan, progress=progress, allow_lookalike_ids=allow_lookalike_ids
            )
    from dsreg.ingest import sources
    from dsreg.ingest.snapshot import add_source

    names: Sequence[str] | None
    if classes is None or not isinstance(classes, str | os.PathLike):
        names = classes
    else:
        names = sources.read_classes(Path(classes))
    if labels is not None or files is None:
        # Label-only sets stream a row group at a time, in bounded memory (#15).
        from dsreg.ingest import stream
        from dsreg.ingest.streamadd import add_stream

        if labels is not None:
            s = stream.labels_stream(
                Path(labels), classes=names, ids=Path(ids) if ids is not None else None
            )
        else:
            assert table is not None
            s = stream.table_stream(
                Path(table), id_column=id_column, label_column=label_column, classes=names
            )
        return add_stream(
            reg, target, s, progress=progress, allow_lookalike_ids=allow_lookalike_ids
        )
    assert table is not None
    src = sources.scan_table(
        Path(table),
        id_column=id_column,
        label_column=label_column,
        classes=names,
        files=Path(files) if files is not None else None,
        allow_lookalike_ids=allow_lookalike_ids,
    )
    return add_source(
        reg,
        dataset,
        src,
        tag=tag,
        force=force,
        progress=progress,
        command=command,
        extra_provenance=target.extra_provenance,
    )


def read_credit(citation: PathArg | None, credit: str | None) -> dict[str, object] | None:
    """``{"credit": …}`` for the snapshot's source from ``--citation FILE.bib`` and
    ``--credit TEXT`` (``dsreg.formats.credit``), or ``None`` when neither is given."""
    if citation is None and credit is None:
        return None
    from dsreg.formats.credit import make_credit

    bibtex = None
    if citation is not None:
        try:
            data = Path(citation).read_bytes()
        except OSError as e:
            raise InputPathError(
                f"cannot read --citation {os.fspath(citation)}: {e.strerror}; give a BibTeX "
                "file (.bib) with the dataset creators' reference",
                path=os.fspath(citation),
            ) from e
        try:
            bibtex = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InvalidInputError(
                f"--citation {os.fspath(citation)} is not UTF-8 text; save the BibTeX as UTF-8"
            ) from None
    return {"credit": make_credit(bibtex=bibtex, text=credit, what=f"--citation {citation}")}
