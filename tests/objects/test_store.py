"""The object store's listing: every stored digest, and no directory left open by a caller that
stops early (the suite runs with warnings as errors, and an unclosed listing warns when it is
collected)."""

from __future__ import annotations

import gc
import itertools
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.objects.store import ObjectStore


@settings(max_examples=60, deadline=None)
@given(
    blobs=st.lists(st.binary(max_size=64), unique=True, max_size=40),
    stop=st.integers(min_value=0, max_value=45),
)
def test_a_listing_of_the_store_stopped_anywhere_closes_what_it_opened(
    tmp_path_factory: pytest.TempPathFactory, blobs: list[bytes], stop: int
) -> None:
    store = ObjectStore(tmp_path_factory.mktemp("store"))
    stored = {store.put_bytes(b) for b in blobs}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        listing = iter(store)
        seen = list(itertools.islice(listing, stop))
        del listing  # dropped part-way, as a caller that found what it wanted does
        gc.collect()
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert unclosed == []
    assert len(seen) == min(stop, len(stored)) and set(seen) <= stored
    assert sorted(store) == sorted(stored)
