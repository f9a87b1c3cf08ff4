"""A damaged votes log never costs a whole record (docs/concepts.md, "Guarantees": a damaged votes
log loses no vote). Damage of every kind (a flipped, deleted or inserted byte, a cut) at every
offset: the records whose bytes are intact are kept, those after the damage too; the damaged
bytes are moved to a file of their own, counted and reported; the log is rewritten atomically
(a kill at any step loses nothing); and through the public API and the command line, an export
after a flipped byte shows every other vote and says what was set aside."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reviewset import ReviewSet, Server
from starlette.testclient import TestClient

import dsreg
from dsreg.reviewing import votelog

VOTES = 12
ANSWERS = ("given", "guessed", "both", "neither")
BASE = "http://127.0.0.1"


@dataclasses.dataclass(frozen=True)
class Log:
    data: bytes
    records: tuple[dict[str, Any], ...]
    bounds: tuple[tuple[int, int], ...]  # each record's bytes in ``data``


@functools.lru_cache
def _log() -> Log:
    """An open record and ``VOTES`` votes, written by the votes log itself."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "votes.log"
        log = votelog.VotesLog(path)
        log.append({"op": "open", "queue": "blake3:" + "e" * 64, "t": 1.0})
        for i in range(VOTES):
            vote = {"op": "vote", "reviewer": f"rater{i % 4}", "row": i, "answer": ANSWERS[i % 4]}
            log.append({**vote, "t": 1_700_000_000.25 + i})
        log.close()
        return _parse(path.read_bytes())


def _parse(data: bytes) -> Log:
    """A whole log's records and their bytes, read line by line."""
    lines = data.split(b"\n")[:-1]
    starts = [sum(len(line) + 1 for line in lines[:i]) for i in range(len(lines) + 1)]
    return Log(
        data,
        tuple(json.loads(line[9:]) for line in lines),
        tuple(itertools.pairwise(starts)),
    )


@dataclasses.dataclass(frozen=True)
class Damage:
    kind: str  # flip, delete, insert, truncate
    offset: int
    payload: bytes = b""  # inserted bytes
    xor: int = 0  # a flip's bits

    def apply(self, data: bytes) -> bytes:
        o = self.offset
        if self.kind == "flip":
            return data[:o] + bytes([data[o] ^ self.xor]) + data[o + 1 :]
        if self.kind == "delete":
            return data[:o] + data[o + 1 :]
        if self.kind == "insert":
            return data[:o] + self.payload + data[o:]
        return data[:o]

    def touches(self, start: int, end: int) -> bool:
        """Whether the record at ``[start, end)`` loses a byte or has one changed or added."""
        if self.kind in ("flip", "delete"):
            return start <= self.offset < end
        if self.offset == end - 1 and self.payload.startswith(b"\n"):
            return False  # the record's line, then the added bytes as lines of their own
        return start < self.offset < end  # an insert between records touches neither

    def adds_at_end(self, end: int) -> bool:
        """Whether it adds bytes after a log's last record (``end``: where it ends), which a
        damaged end counts as a record (logbytes)."""
        newline = self.payload.startswith(b"\n")
        return self.kind == "insert" and (
            self.offset == end or (newline and self.offset == end - 1)
        )

    def removes(self, start: int) -> bool:
        return self.kind == "truncate" and start >= self.offset


@st.composite
def damages(draw: st.DrawFn, size: int, kinds: tuple[str, ...]) -> Damage:
    kind = draw(st.sampled_from(kinds))
    if kind == "insert":
        payload = draw(st.binary(min_size=1, max_size=40))
        # Added bytes that start a line as a record does, or hold an "op" key, may count as a
        # record in a damaged end (logbytes): the count would be one too many, never too few.
        if re.search(rb"\n[0-9a-f]", payload) or b'"op":"' in payload:
            payload = payload.replace(b"\n", b"x").replace(b'"', b"x")
        return Damage(kind, draw(st.integers(0, size)), payload=payload)
    offset = draw(st.integers(0, size - 1))
    return Damage(kind, offset, xor=draw(st.integers(1, 255)) if kind == "flip" else 0)


def _leftmost(data: bytes, d: Damage) -> Damage:
    """An insert, moved left while the byte before it equals its last byte: the same damaged
    file (``7`` inserted after a ``7`` is a ``7`` inserted before it), so a record the added
    bytes only seem to enter is whole, and the reader rightly keeps it."""
    if d.kind != "insert":
        return d
    offset, payload = d.offset, d.payload
    while offset > 0 and data[offset - 1] == payload[-1]:
        payload = data[offset - 1 : offset] + payload[:-1]
        offset -= 1
    return Damage(d.kind, offset, payload=payload)


def _expected(log: Log, hits: list[Damage]) -> tuple[list[int], list[int]]:
    """The records kept (untouched, not cut off) and those damaged, by index."""
    hits = [_leftmost(log.data, d) for d in hits]
    kept, touched = [], []
    for i, (start, end) in enumerate(log.bounds):
        if any(d.removes(start) for d in hits):
            continue
        (touched if any(d.touches(start, end) for d in hits) else kept).append(i)
    return kept, touched


def _quarantined(span: dsreg.SetAside) -> bytes:
    assert span.file is not None
    header, _, body = Path(span.file).read_bytes().partition(b"\n")
    meta = json.loads(header[9:])
    assert (meta["start"], meta["end"], meta["records"]) == (span.start, span.end, span.records)
    return body


def _where(span: dsreg.SetAside) -> tuple[int, int, int, tuple[int, int] | None]:
    return span.start, span.end, span.records, span.seqs


def _check_repair(log: Log, hits: list[Damage], folder: Path, *, exact: bool) -> None:
    damaged = log.data
    for d in sorted(hits, key=lambda d: -d.offset):
        damaged = d.apply(damaged)
    kept, touched = _expected(log, hits)
    extra = sum(1 for d in hits if d.adds_at_end(len(log.data)))
    path = folder / "votes.log"
    path.write_bytes(damaged)
    (folder / "copy").mkdir()
    (folder / "copy" / "votes.log").write_bytes(damaged)

    votes = votelog.VotesLog(path)
    try:
        assert votes.records == [log.records[i] for i in kept]
        # A reader that does not repair (export, finish) sees the same records and spans.
        read = votelog.read_votes(folder / "copy" / "votes.log")
        assert read.records == votes.records
        assert all(span.file is None for span in read.set_aside)
        assert (folder / "copy" / "votes.log").read_bytes() == damaged
        counted = sum(span.records for span in votes.set_aside)
        assert counted >= len(touched)
        if exact:
            assert counted == len(touched) + extra
        assert [_where(s) for s in votes.set_aside] == [_where(s) for s in read.set_aside]
        # The damaged file, byte for byte, is the spans moved aside and the records kept.
        rest = bytearray()
        pos = 0
        for span in sorted(votes.set_aside, key=lambda s: s.start):
            assert _quarantined(span) == damaged[span.start : span.end]
            rest += damaged[pos : span.start]
            pos = span.end
        rest += damaged[pos:]
        assert path.read_bytes() == bytes(rest)
        assert bytes(rest) == b"".join(log.data[slice(*log.bounds[i])] for i in kept)
        assert votes.repaired == len(damaged) - len(rest)
        stored = votes.append({"op": "skip", "reviewer": "z", "row": 0, "t": 2.0})
    finally:
        votes.close()
    # A new record never takes the number of one kept or set aside.
    assert stored["seq"] > max((log.records[i]["seq"] for i in kept + touched), default=-1)
    # Opened again: nothing more to move, the same spans reported, the new record kept.
    again = votelog.VotesLog(path)
    try:
        assert again.repaired == 0
        assert again.set_aside == votes.set_aside
        assert again.records == [*(log.records[i] for i in kept), stored]
    finally:
        again.close()


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_one_damage_anywhere_costs_only_the_record_it_hits(data: st.DataObject) -> None:
    log = _log()
    hit = data.draw(damages(len(log.data), ("flip", "delete", "insert", "truncate")))
    with tempfile.TemporaryDirectory() as tmp:
        _check_repair(log, [hit], Path(tmp), exact=True)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_several_damages_keep_every_intact_record(data: st.DataObject) -> None:
    log = _log()
    hits = data.draw(
        st.lists(
            damages(len(log.data), ("flip", "delete", "insert")),
            min_size=2,
            max_size=4,
            unique_by=lambda d: d.offset,
        )
    )
    last = log.bounds[-1]
    # Between records the count is exact; two damaged records ending the log may count as one
    # more or as exactly as many (never fewer).
    exact = not any(d.touches(*last) or d.offset == last[1] - 1 for d in hits)
    with tempfile.TemporaryDirectory() as tmp:
        _check_repair(log, hits, Path(tmp), exact=exact)


def test_every_offset_and_every_kind() -> None:
    """Each kind of damage at each offset of a log, without hypothesis choosing: the scan keeps
    exactly the untouched records and counts exactly the touched ones."""
    from dsreg.reviewing.logbytes import scan

    log = _log()
    cases = 0
    for offset in range(len(log.data) + 1):
        kinds = [Damage("insert", offset, payload=b"\x00X\n")]
        if offset < len(log.data):
            kinds += [
                Damage("flip", offset, xor=0x01),
                Damage("flip", offset, xor=log.data[offset] ^ 0x0A),  # into a newline
                Damage("delete", offset),
                Damage("truncate", offset),
            ]
        for hit in kinds:
            if hit.kind == "flip" and hit.xor == 0:
                continue
            kept, touched = _expected(log, [hit])
            found = scan(hit.apply(log.data), log="votes.log")
            assert found.records == [log.records[i] for i in kept], hit
            extra = 1 if hit.adds_at_end(len(log.data)) else 0
            assert sum(s.records for s in found.damaged) == len(touched) + extra, hit
            cases += 1
    assert cases > 4 * len(log.data)


def test_a_kill_at_any_step_of_the_repair_loses_nothing(tmp_path: Path) -> None:
    """The repair is killed (``os._exit`` in a forked child, so no clean-up runs) at each of its
    file-system calls in turn: the log is the old one or the new one, whole; the next open
    finishes the repair with each span moved aside once."""
    log = _log()
    hits = [Damage("flip", log.bounds[3][0] + 20, xor=0x20), Damage("truncate", len(log.data) - 7)]
    damaged = hits[0].apply(hits[1].apply(log.data))
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "votes.log").write_bytes(damaged)
    reference = votelog.VotesLog(clean / "votes.log")
    reference.close()
    repaired = (clean / "votes.log").read_bytes()
    hooked = ("open", "write", "fsync", "rename", "close", "unlink", "replace")
    for step in range(200):
        folder = tmp_path / f"kill-{step}"
        folder.mkdir()
        (folder / "votes.log").write_bytes(damaged)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork beside threads
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            count = itertools.count()

            def dying(
                real: Callable[..., Any], at: int = step, calls: Iterator[int] = count
            ) -> Callable[..., Any]:
                def call(*args: Any, **kwargs: Any) -> Any:
                    if next(calls) == at:
                        os._exit(9)
                    return real(*args, **kwargs)

                return call

            for name in hooked:
                setattr(os, name, dying(getattr(os, name)))
            try:
                votelog.VotesLog(folder / "votes.log").close()
            except BaseException:
                os._exit(3)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) in (0, 9)
        assert (folder / "votes.log").read_bytes() in (damaged, repaired), step
        again = votelog.VotesLog(folder / "votes.log")
        try:
            assert again.records == reference.records
            assert [_where(s) for s in again.set_aside] == [_where(s) for s in reference.set_aside]
            for span in again.set_aside:
                assert _quarantined(span) == damaged[span.start : span.end]
        finally:
            again.close()
        assert (folder / "votes.log").read_bytes() == repaired
        moved = sorted(n for n in os.listdir(folder) if n.startswith("votes.log.damaged-"))
        assert len(moved) == len(reference.set_aside) and sorted(os.listdir(folder)) == [
            "votes.log",
            *moved,
        ]
        if os.waitstatus_to_exitcode(status) == 0:
            break
    else:
        pytest.fail("the repair never finished in 200 steps")
    assert step > 10  # the repair was killed at each of its steps before it finished


# -- through the public API and the command line ----------------------------------------------


def _cast(server: dsreg.ReviewServer, votes: int) -> None:
    """``votes`` answers through the page's requests, by as many reviewers as it takes."""
    client = TestClient(server.asgi(), base_url=BASE)
    assert client.get(f"/?token={server.token}", follow_redirects=False).status_code == 303
    headers = {"X-Dsreg-Token": server.token, "Origin": BASE}
    cast = 0
    for n in range(votes):
        name = f"rater{n}"
        while cast < votes:
            item = client.post("/api/next", json={"reviewer": name}, headers=headers).json()
            if item["item"] is None:
                break
            handed = item["item"]
            body = {
                "reviewer": name,
                "row": handed["row"],
                "ticket": handed["ticket"],
                "answer": ANSWERS[cast % 4],
            }
            assert client.post("/api/vote", json=body, headers=headers).status_code == 200
            cast += 1


def _log_of(review_set: ReviewSet) -> Path:
    return next((review_set.registry / "review").glob("*/votes.log"))


@pytest.fixture
def thirty(review_set: ReviewSet) -> Iterator[Path]:
    """30 votes acknowledged by the server, then record 3 (the third vote) with a flipped byte."""
    with dsreg.review(review_set.spec, registry=review_set.registry) as server:
        _cast(server, 30)
        assert server.progress().everyone == 30
    log = _log_of(review_set)
    data = bytearray(log.read_bytes())
    lines = bytes(data).split(b"\n")
    assert len(lines) == 32 and json.loads(lines[3][9:])["seq"] == 3
    data[sum(len(line) + 1 for line in lines[:3]) + 30] ^= 0x04
    log.write_bytes(bytes(data))
    yield log


def _exported(path: Path) -> int:
    return sum(sum(r["mturk"].values()) for r in json.loads(path.read_text()))


def test_a_flipped_byte_in_record_3_of_30_costs_one_vote_and_says_so(
    thirty: Path, review_set: ReviewSet, tmp_path: Path
) -> None:
    out = tmp_path / "votes.json"
    # Before any server opens the log again: the export leaves out the damaged vote, says so.
    early = dsreg.review_export(review_set.spec, out, registry=review_set.registry)
    assert _exported(out) == 29 and early.set_aside_records == 1
    assert early.set_aside[0].file is None and early.set_aside[0].seqs == (3, 3)
    with dsreg.review(review_set.spec, registry=review_set.registry) as server:
        (span,) = server.set_aside
        assert (span.records, span.seqs) == (1, (3, 3))
        assert server.progress().everyone == 29
    assert span.file is not None and Path(span.file).parent == thirty.parent
    exported = dsreg.review_export(review_set.spec, out, registry=review_set.registry)
    assert _exported(out) == 29
    assert exported.set_aside == (span,) and exported.set_aside_records == 1
    assert len(thirty.read_bytes().split(b"\n")) == 31  # 30 records whole, one moved aside


def test_the_command_line_says_what_was_set_aside(
    thirty: Path, review_set: ReviewSet, cli: Any, tmp_path: Path
) -> None:
    server = Server(review_set)
    try:
        server.start()
        spans = server.started["set_aside"]
        assert isinstance(spans, list) and len(spans) == 1 and spans[0]["records"] == 1
        moved = spans[0]["file"]
        said = server.stderr()
        assert "1 record (answers, skips or undos) that are not counted" in said
        assert f"of {thirty} (" in said and f"moved to {moved}" in said
    finally:
        server.stop()
    out = tmp_path / "votes.json"
    reg = ["--registry", str(review_set.registry)]
    exported = cli("review", review_set.spec, "--export", str(out), *reg)
    assert exported.exit_code == 0, exported.stderr
    warning = "Warning: the votes log has 1 damaged span set aside, holding 1 record"
    assert warning in exported.stderr and f"moved to {moved}" in exported.stderr
    assert _exported(out) == 29
    finished = cli("review", review_set.spec, "--finish", "--json", *reg)
    assert finished.exit_code == 0, finished.stderr
    assert warning in finished.stderr and f"moved to {moved}" in finished.stderr
    again = dsreg.review_finish(review_set.spec, registry=review_set.registry)
    assert [span.records for span in again.set_aside] == [1]


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_damage_anywhere_through_review_and_export(
    review_set: ReviewSet, tmp_path: Path, data: st.DataObject
) -> None:
    """Votes, skips and undos; one damage anywhere; the server starts (never a crash, whatever
    the damaged record was: the queue's first record, a vote that a kept undo cancels, an undo)
    and the export counts exactly the votes of the records kept."""
    base = _base_log(review_set)
    log = _log_of(review_set)
    folder = log.parent
    for name in os.listdir(folder):
        if name != "votes.log":
            os.unlink(folder / name)
    hit = data.draw(damages(len(base.data), ("flip", "delete", "insert", "truncate")))
    log.write_bytes(hit.apply(base.data))
    kept = [base.records[i] for i in _expected(base, [hit])[0]]
    undone = {r["target"] for r in kept if r["op"] == "undo"}
    votes = sum(1 for r in kept if r["op"] == "vote" and r["seq"] not in undone)
    server = dsreg.review(review_set.spec, registry=review_set.registry)  # opened, not served
    try:
        assert server.progress().everyone == votes
        assert server.session.log.records[: len(kept)] == kept
        set_aside = server.set_aside
    finally:
        server.stop()
    out = tmp_path / "votes.json"
    if votes:
        exported = dsreg.review_export(review_set.spec, out, registry=review_set.registry)
        assert _exported(out) == votes and exported.set_aside == set_aside
    else:
        with pytest.raises(dsreg.VotesError):
            dsreg.review_export(review_set.spec, out, registry=review_set.registry)


_BASES: dict[Path, Log] = {}


def _base_log(review_set: ReviewSet) -> Log:
    """The log of a few votes, skips and undos (made once per review set)."""
    if review_set.registry not in _BASES:
        with dsreg.review(review_set.spec, votes_per_item=2, registry=review_set.registry) as s:
            queue = s.session.queue
            for n, name in enumerate(("ann", "bo", "cy")):
                for k in range(4):
                    item = queue.next_item(name)
                    assert item is not None
                    if (n + k) % 3 == 2:
                        queue.skip(name, item.row)
                    else:
                        queue.vote(name, item.row, ANSWERS[k])
                    if k == 1:
                        queue.undo(name)
        _BASES[review_set.registry] = _parse(_log_of(review_set).read_bytes())
    return _BASES[review_set.registry]


def test_an_answer_being_written_is_not_reported_as_damage(
    review_set: ReviewSet, tmp_path: Path
) -> None:
    """An export while a server writes: an unfinished last line is the answer being written (the
    server moved any damage aside when it opened the log), so it is not counted as set aside;
    with no server holding the log it is damage, and reported."""
    out = tmp_path / "votes.json"
    with dsreg.review(review_set.spec, registry=review_set.registry) as server:
        _cast(server, 3)
        log = _log_of(review_set)
        whole = log.read_bytes()
        with log.open("ab") as f:
            f.write(b'0badc0de {"op":"vote","reviewer":"ann","ro')
        served = dsreg.review_export(review_set.spec, out, registry=review_set.registry)
        assert served == 3 and served.set_aside == ()
        log.write_bytes(whole)
    with log.open("ab") as f:
        f.write(b'0badc0de {"op":"vote","reviewer":"ann","ro')
    alone = dsreg.review_export(review_set.spec, out, registry=review_set.registry)
    assert alone == 3 and alone.set_aside_records == 1 and alone.set_aside[0].file is None
