"""``dsreg add`` from any source: an ImageFolder tree, a label file or a table of examples.

The tree's path stays light (no numpy, pyarrow or schema validator) until it must store
something: re-adding an unchanged tree is answered from the scan (``tree.py``). So the modules
of the other sources, and of the tree's storing, are imported when first used.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dsreg._util.lazy import lazy_imports
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.errors import InputPathError, InvalidInputError
from dsreg.ingest.result import AddResult, AddTarget
from dsreg.registry.folder import Registry

with lazy_imports():
    from dsreg.formats import credit as credits
    from dsreg.ingest import questions as question_sets
    from dsreg.ingest import snapshot, sources, stream, streamadd, tree, treescan

__all__ = ["AddOptions", "add", "read_credit", "read_provenance"]

PathArg = str | os.PathLike[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class AddOptions:
    """One add, as ``dsreg.add`` takes it: the dataset, its one source (``path``, ``labels``,
    ``table``, ``questions`` or ``answers``), how to read that source, the tag to set and the
    credit and licence to record. A request that names no source, several, or options that
    do not go with its source is refused when made, before anything is read. ``id_column``
    None: a table's ids are in ``example_id``, a question set's are its row numbers."""

    dataset: str
    path: PathArg | None = None
    labels: PathArg | None = None
    ids: PathArg | None = None
    table: PathArg | None = None
    questions: PathArg | None = None
    answers: PathArg | None = None
    id_column: str | None = None
    label_column: str = "label"
    question_column: str = "question"
    choices_column: str = "choices"
    answer_column: str = "answer"
    normalize: str | None = None
    files: PathArg | None = None
    classes: PathArg | Sequence[str] | None = None
    tag: str | None = None
    force: bool = False
    citation: PathArg | None = None
    credit: str | None = None
    license: str | None = None
    allow_lookalike_ids: bool = False

    def __post_init__(self) -> None:
        given = (self.path, self.labels, self.table, self.questions, self.answers)
        if sum(x is not None for x in given) != 1:
            raise InvalidInputError(
                "give exactly one source: a folder PATH (ImageFolder), --labels FILE, "
                "--table FILE, --questions FILE (multiple choice) or --answers FILE (exact "
                "answers)"
            )
        if self.normalize is not None and self.answers is None:
            raise InvalidInputError(
                "--normalize goes with --answers: it is how an exact-answer set's answers are "
                "compared"
            )
        if self.questions is not None and self.classes is not None:
            raise InvalidInputError(
                "--classes does not go with --questions: a multiple-choice set's classes are "
                "the answer letters A, B, C, ..."
            )
        if self.files is not None and self.table is None:
            raise InvalidInputError(
                "--files goes with --table; an ImageFolder tree holds its files"
            )
        if self.ids is not None and self.labels is None:
            raise InvalidInputError(
                "--ids goes with --labels; a --table or a question set names its ids in a "
                "column, a folder by its paths"
            )
        if self.id_column is not None and self.table is None and not self.question_set:
            raise InvalidInputError(
                "--id-column goes with --table, --questions or --answers: it names a column"
            )
        if self.path is not None and self.classes is not None:
            raise InvalidInputError("--classes goes with --labels or --table; folders name classes")

    @property
    def question_set(self) -> bool:
        return self.questions is not None or self.answers is not None

    @property
    def source(self) -> PathArg:
        """The one source given: the tree, the label file, the table or the question set."""
        given = (self.path, self.labels, self.table, self.questions, self.answers)
        return next(g for g in given if g is not None)  # __post_init__ holds one


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
    options: AddOptions,
    *,
    progress: ProgressHook = no_progress,
    command: str = "",
) -> AddResult:
    """Store ``options``' source as a snapshot of its dataset (see ``dsreg.add``)."""
    target = AddTarget(
        dataset=options.dataset,
        tag=options.tag,
        force=options.force,
        command=command,
        extra_provenance=read_provenance(options),
    )
    lookalike = options.allow_lookalike_ids
    if options.path is not None:
        with _no_cyclic_gc():
            scan = treescan.scan_tree(Path(options.path))
            return tree.add_tree(
                reg, target, scan, progress=progress, allow_lookalike_ids=lookalike
            )
    names = sources.class_names(options.classes)
    if options.question_set:
        return snapshot.add_source(
            reg,
            options.dataset,
            question_sets.scan_questions(_question_source(options, names)),
            tag=options.tag,
            force=options.force,
            progress=progress,
            command=command,
            extra_provenance=target.extra_provenance,
        )
    if options.labels is not None or options.files is None:
        # Label-only sets stream a row group at a time, in bounded memory.
        src = _stream(options, names)
        return streamadd.add_stream(reg, target, src, allow_lookalike_ids=lookalike)
    assert options.table is not None and options.files is not None
    table = sources.scan_table(
        Path(options.table),
        id_column=options.id_column or "example_id",
        label_column=options.label_column,
        classes=names,
        files=Path(options.files),
        allow_lookalike_ids=lookalike,
    )
    return snapshot.add_source(
        reg,
        options.dataset,
        table,
        tag=options.tag,
        force=options.force,
        progress=progress,
        command=command,
        extra_provenance=target.extra_provenance,
    )


def _stream(options: AddOptions, names: Sequence[str] | None) -> stream.StreamSource:
    """A label-only set's rows, read a row group at a time: a label file, or a table without
    payload files."""
    if options.labels is not None:
        ids = Path(options.ids) if options.ids is not None else None
        return stream.labels_stream(Path(options.labels), classes=names, ids=ids)
    assert options.table is not None
    return stream.table_stream(
        Path(options.table),
        id_column=options.id_column or "example_id",
        label_column=options.label_column,
        classes=names,
    )


def _question_source(
    options: AddOptions, names: Sequence[str] | None
) -> question_sets.QuestionSource:
    """How to read ``options``' question set: ``--questions`` (multiple choice) or
    ``--answers`` (exact answers, ``--classes``: answers its classes hold besides the rows')."""
    mc = options.questions is not None
    return question_sets.QuestionSource(
        path=Path(options.source),
        task=question_sets.MULTIPLE_CHOICE if mc else question_sets.EXACT_ANSWER,
        question_column=options.question_column,
        choices_column=options.choices_column,
        answer_column=options.answer_column,
        id_column=options.id_column,
        normalize=options.normalize or "text",
        extra_answers=tuple(names or ()),
        allow_lookalike_ids=options.allow_lookalike_ids,
    )


def read_provenance(options: AddOptions) -> dict[str, object] | None:
    """What the snapshot's ``source`` records beside what its source says of itself: the
    credit (``read_credit``) and the licence (``source.license``, checked and canonical);
    ``None`` when neither is given, so that the snapshot has neither key."""
    extra = read_credit(options.citation, options.credit) or {}
    if options.license is not None:
        extra["license"] = credits.check_license(options.license)
    return extra or None


def read_credit(citation: PathArg | None, credit: str | None) -> dict[str, object] | None:
    """``{"credit": …}`` for the snapshot's source from ``--citation FILE.bib`` and
    ``--credit TEXT`` (``dsreg.formats.credit``), or ``None`` when neither is given."""
    if citation is None and credit is None:
        return None
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
    return {
        "credit": credits.make_credit(bibtex=bibtex, text=credit, what=f"--citation {citation}")
    }
