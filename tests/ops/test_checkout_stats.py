"""What a checkout keeps of the objects it re-hashed or linked, for their trust records
(``ObjectStats``), and the journal's bytes on disk.

``ObjectStats`` merges the chunks' sightings by rules a trust record depends on: a changed
object (no stat) is never recorded, of two stats the later ctime wins, an object is recorded
only where a stat of it differed from its record, and what went to a recorder while the first
pass ran is not recorded again. The property test holds it against a plain model of those rules
written with positional rows, the form the checkout used before the stats were named.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.ops.checkout.folder import read_journal
from dsreg.ops.checkout.journal import JOURNAL, Journal, write_journal
from dsreg.ops.checkout.objects import ObjectStats, Sightings
from dsreg.registry.trust import StatKey

_Row = tuple[str, StatKey | None, bool, bool]


class _Model:
    """The merge rules over ``(blob, stat, safe, differs)`` rows."""

    def __init__(self) -> None:
        self.stats: dict[str, tuple[StatKey, bool, bool]] = {}
        self.bad: set[str] = set()
        self.sent: dict[str, tuple[StatKey, bool]] = {}

    def add(self, rows: list[_Row], sink: bool) -> None:
        for blob, stat, safe, new in rows:
            if stat is None:
                self.bad.add(blob)
                continue
            if new and sink:
                self.sent[blob] = (stat, safe)
                new = False
            old = self.stats.get(blob)
            if old is None:
                self.stats[blob] = (stat, safe, new)
            elif stat[3] >= old[0][3]:
                self.stats[blob] = (stat, safe, new or old[2])

    def changed(self) -> dict[str, tuple[StatKey, bool]]:
        return {
            b: (s, safe) for b, (s, safe, new) in self.stats.items() if new and b not in self.bad
        }

    def good(self) -> dict[str, StatKey]:
        return {b: v[0] for b, v in self.stats.items() if b not in self.bad}


_blobs = st.sampled_from(["a" * 64, "b" * 64, "c" * 64, "d" * 64])
_stats = st.none() | st.tuples(
    st.integers(1, 3),
    st.integers(0, 5),
    st.integers(0, 20),
    st.integers(0, 20),
    st.integers(1, 3),
)
_rows = st.lists(st.tuples(_blobs, _stats, st.booleans(), st.booleans()), max_size=6)
# Chunks of rows, each with whether a recorder took them as they arrived (the first pass).
_chunks = st.lists(st.tuples(_rows, st.booleans()), max_size=6)


def _sightings(rows: list[_Row]) -> Sightings:
    seen = Sightings()
    for blob, stat, safe, differs in rows:
        if stat is None:
            seen.changed(blob)
        else:
            seen.blobs.append(blob)
            seen.stats.append(stat)
            seen.safe.append(safe)
            seen.differs.append(differs)
    return seen


@settings(max_examples=400, deadline=None)
@given(_chunks)
def test_object_stats_merge_like_the_rules(chunks: list[tuple[list[_Row], bool]]) -> None:
    model = _Model()
    stats = ObjectStats()
    sent: dict[str, tuple[StatKey, bool]] = {}
    for rows, sink in chunks:
        model.add(rows, sink)
        stats.sink = sent.update if sink else None
        stats.add(_sightings(rows))
    assert stats.to_record() == model.changed()
    assert stats.good() == model.good()
    assert sent == model.sent


def test_sighting_is_safe_only_when_taken_after_a_clock_older_than_it() -> None:
    seen = Sightings()
    rec: StatKey = (1, 2, 5, 6, 1)
    seen.saw("a" * 64, (1, 2, 5, 6, 1), 7, rec)  # mtime and ctime before the clock: safe
    seen.saw("b" * 64, (1, 2, 5, 7, 1), 7, None)  # ctime at the clock: not safe
    seen.saw("c" * 64, (1, 2, 5, 6, 1), None, None)  # no clock read: not safe
    seen.saw("d" * 64, None, 7, rec)  # changed: no stat, never recorded
    assert list(seen) == [
        ("a" * 64, (1, 2, 5, 6, 1), True, False),
        ("b" * 64, (1, 2, 5, 7, 1), False, True),
        ("c" * 64, (1, 2, 5, 6, 1), False, True),
        ("d" * 64, None, False, True),
    ]


def test_journal_bytes_on_disk(tmp_path: Path) -> None:
    old, new = "blake3:" + "1" * 64, "blake3:" + "2" * 64
    journal = Journal(from_revision=old, from_link="copy", to_revision=new, link="hardlink")
    write_journal(tmp_path, journal.to_bytes())
    assert (tmp_path / JOURNAL).read_bytes() == (
        f'{{\n  "from": "{old}",\n  "from_link": "copy",\n  "link": "hardlink",\n'
        f'  "schema": "dsreg/journal/1",\n  "to": "{new}"\n}}\n'
    ).encode()
    assert read_journal(tmp_path) == journal
    assert journal.held() == {new: "hardlink", old: "copy"}
    first = Journal(from_revision=None, from_link=None, to_revision=new, link="copy")
    write_journal(tmp_path, first.to_bytes())
    assert b'"from": null' in (tmp_path / JOURNAL).read_bytes()
    assert read_journal(tmp_path) == first
    assert first.held() == {new: "copy"}
