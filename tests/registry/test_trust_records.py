"""Trust records as the state stores them: the bytes of a row (the digest, the five fields and
a CRC-32 of both), whichever writer packed them, and when a checkout's recorder commits.

The recorder packs many rows into one blob that SQLite splits; these tests hold its rows to
the layout ``decode_record`` reads, byte for byte, so that records written by one release are
read by the next."""

from __future__ import annotations

import os
import sqlite3
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.objects.digest import PREFIX, object_relpath, object_relpaths
from dsreg.registry.state import StatCache, decode_record
from dsreg.registry.trust import StatKey

_I64 = st.integers(-(2**63), 2**63 - 1)
_STATS = st.tuples(_I64, _I64, _I64, _I64, _I64)
_HEX = st.binary(min_size=32, max_size=32).map(bytes.hex)


def _expected(hexd: str, stat: StatKey) -> bytes:
    """A row's value as the table has always held it: ``<qqqqq`` and ``<I`` of the CRC-32 of
    the digest's bytes and those fields."""
    fields = struct.pack("<qqqqq", *stat)
    return fields + struct.pack("<I", zlib.crc32(bytes.fromhex(hexd) + fields))


def _rows(path: Path) -> dict[bytes, bytes]:
    con = sqlite3.connect(path)
    try:
        return dict(con.execute("SELECT digest, stat FROM objects_v2"))
    finally:
        con.close()


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(_HEX, _STATS, min_size=1, max_size=40))
def test_records_are_stored_in_the_table_layout(
    tmp_path_factory: pytest.TempPathFactory, records: dict[str, StatKey]
) -> None:
    state = StatCache(tmp_path_factory.mktemp("state"))
    state.put_object_stats(records.items())
    stored = _rows(state.path)
    assert stored == {bytes.fromhex(h): _expected(h, s) for h, s in records.items()}
    assert all(isinstance(k, bytes) and isinstance(v, bytes) for k, v in stored.items())
    assert state.object_stats(list(records)) == records
    assert {k: decode_record(k, v) for k, v in stored.items()} == {
        bytes.fromhex(h): s for h, s in records.items()
    }


def test_a_record_written_again_replaces_the_old(tmp_path: Path) -> None:
    state = StatCache(tmp_path)
    h = "ab" * 32
    state.put_object_stats([(h, (1, 2, 3, 4, 1)), ("cd" * 32, (5, 6, 7, 8, 1))])
    state.put_object_stats([(h, (1, 2, 3, 9, 2))])
    assert state.object_stats([h, "cd" * 32]) == {h: (1, 2, 3, 9, 2), "cd" * 32: (5, 6, 7, 8, 1)}
    assert len(_rows(state.path)) == 2


def test_the_whole_table_comes_back_only_for_most_of_it(tmp_path: Path) -> None:
    """Asked for most of the table, the records come as the table (the caller looks up its
    own); asked for a few, only those; ``object_stats`` returns what it was asked for."""
    state = StatCache(tmp_path)
    rows = {f"{i:064x}": (i, 1, 2, 3, 1) for i in range(40)}
    state.put_object_stats(rows.items())
    few = list(rows)[:3]
    assert set(state.object_records(few)) == {bytes.fromhex(h) for h in few}
    assert len(state.object_records(list(rows)[:20])) == 40
    assert state.object_stats(list(rows)[:20]) == {h: rows[h] for h in list(rows)[:20]}


def test_the_recorder_commits_every_so_many_rows_and_at_the_end(tmp_path: Path) -> None:
    state = StatCache(tmp_path)
    state.put_object_stats([("00" * 32, (0, 0, 0, 0, 1))])  # the table exists
    with state.object_recorder(commit_every=5) as put:
        put([(f"{i:064x}", (i, 1, 2, 3, 1)) for i in range(1, 4)])
        assert len(_rows(state.path)) == 1  # three rows, not committed yet
        put([(f"{i:064x}", (i, 1, 2, 3, 1)) for i in range(4, 7)])
        assert len(_rows(state.path)) == 7  # six rows: committed
        put([(f"{i:064x}", (i, 1, 2, 3, 1)) for i in range(7, 9)])
        assert len(_rows(state.path)) == 7
    assert len(_rows(state.path)) == 9
    assert state.object_stats([f"{i:064x}" for i in range(1, 9)]) == {
        f"{i:064x}": (i, 1, 2, 3, 1) for i in range(1, 9)
    }


def test_a_recorder_on_a_damaged_state_only_costs_speed(tmp_path: Path) -> None:
    state = StatCache(tmp_path)
    state.path.parent.mkdir(parents=True)
    state.path.write_bytes(os.urandom(4096))
    with state.object_recorder(commit_every=5) as put:
        put([("ab" * 32, (1, 2, 3, 4, 1))])
    assert state.object_stats(["ab" * 32]) == {}


@given(st.lists(_HEX, max_size=20))
def test_object_relpaths_is_object_relpath_of_each(hexes: list[str]) -> None:
    digests = [PREFIX + h for h in hexes]
    assert object_relpaths(digests) == [object_relpath(d) for d in digests]
