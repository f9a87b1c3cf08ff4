"""The ref log has one writer, RefStore: a clone's copy of a remote's history goes through it,
under the dataset's lock, and a line torn by a crash never swallows the next entry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dsreg.ingest.snapshot import add_source
from dsreg.ingest.sources import scan_imagefolder
from dsreg.registry.folder import Registry
from dsreg.registry.refs import LogEntry, parse_log
from dsreg.remote.config import add_remote
from dsreg.remote.transfer import clone, push


def _entry(n: int) -> LogEntry:
    return LogEntry(
        time=f"2026-01-0{n}T00:00:00Z",
        user="someone",
        dataset="pets",
        tag=f"v{n}",
        old=None,
        new="blake3:" + f"{n:x}" * 64,
        command=f"dsreg tag pets@v{n}",
        event="push",
    )


def test_entries_appended_after_a_torn_line_are_kept_whole(
    make_registry: Callable[..., Registry],
) -> None:
    reg = make_registry()
    first = _entry(1)
    reg.refs.append_log("pets", [first])
    path = reg.refs.logs / "pets.jsonl"
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"time": "2026-01-02T00:00')  # a crash in the middle of an append
    reg.refs.append_log("pets", [_entry(2), _entry(3)])
    assert reg.refs.log("pets") == [first, _entry(2), _entry(3)]
    assert path.read_text(encoding="utf-8").endswith("\n")


def test_appending_nothing_writes_nothing(make_registry: Callable[..., Registry]) -> None:
    reg = make_registry()
    reg.refs.append_log("pets", [])
    assert not (reg.refs.logs / "pets.jsonl").exists()


def test_a_log_line_round_trips_and_a_new_entry_is_stamped() -> None:
    entry = LogEntry.now(dataset="pets", tag="v1", old=None, new="blake3:" + "a" * 64, command="c")
    assert entry.user and entry.time.endswith("Z") and entry.event == "tag"
    text = entry.to_line() + "not json\n" + _entry(2).to_line()
    assert entry.to_line().count("\n") == 1
    assert parse_log(text) == [entry, _entry(2)]


def test_a_clone_starts_its_log_with_the_remote_history(
    make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path], tmp_path: Path
) -> None:
    reg = make_registry()
    add_source(reg, "pets", scan_imagefolder(make_imagefolder()), tag="v1")
    remote = tmp_path / "remote"
    add_remote(reg, "origin", str(remote), default=True)
    push(reg)
    # The push carries the local history: the remote's log holds the line that set v1 here
    # (not a line of its own for the same move).
    history = parse_log((remote / "logs" / "pets.jsonl").read_text(encoding="utf-8"))
    assert history == reg.refs.log("pets")
    assert [(e.tag, e.event) for e in history] == [("v1", "tag")]

    # The clone starts its log with that history; setting v1 to the value its last line
    # records is not logged again.
    cloned = clone(str(remote), tmp_path / "clone")
    log = Registry(Path(cloned.registry)).refs.log("pets")
    assert log == history


def test_a_tag_line_left_by_a_crash_is_not_written_again_after_other_events(
    make_registry: Callable[..., Registry],
) -> None:
    """``detect --tag`` logs its overlay, then the tag's line, then installs the tag. Killed
    between the line and the tag, its re-run logs the overlay again before the tag: the
    pending tag line is not the last one any more, and must still not be written twice."""
    reg = make_registry()
    digest = "blake3:" + "c" * 64
    overlay = "blake3:" + "d" * 64
    reg.refs.record("pets", event="overlay", new=overlay, command="dsreg detect")
    pending = LogEntry.now(dataset="pets", tag="found", old=None, new=digest, command="c")
    reg.refs.append_log("pets", [pending])  # the line written, the tag not installed (a crash)
    assert reg.refs.get("pets", "found") is None
    reg.refs.record("pets", event="overlay", new=overlay, command="dsreg detect")  # the re-run
    assert reg.refs.set("pets", "found", digest, command="c") is None
    assert reg.refs.get("pets", "found") == digest
    moves = [e for e in reg.refs.log("pets") if e.tag == "found"]
    assert len(moves) == 1
    # a later, different move of the same tag is logged as usual
    other = "blake3:" + "e" * 64
    reg.refs.set("pets", "found", other, force=True, command="c")
    assert [e.new for e in reg.refs.log("pets") if e.tag == "found"] == [digest, other]
