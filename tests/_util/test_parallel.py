def test_gc_paused_restores_the_collector_as_it_found_it() -> None:
    import gc

    from dsreg._util.parallel import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer step still runs
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # found off, left off
    finally:
        gc.enable()


def test_behind_runs_calls_in_order_on_one_thread_and_raises_the_first_error() -> None:
    import threading

    import pytest

    from dsreg._util.parallel import Behind

    seen: list[tuple[int, str]] = []

    def note(k: int) -> None:
        seen.append((k, threading.current_thread().name))

    b = Behind()
    b.close()  # no call: nothing to wait for
    for k in range(100):
        b(note, k)
    b.close()
    assert [k for k, _ in seen] == list(range(100))
    assert {name for _, name in seen} == {"dsreg-behind"}

    def boom(k: int) -> None:
        raise ValueError(f"call {k} failed")

    seen.clear()
    b(note, 1)
    b(boom, 2)
    b(note, 3)  # skipped: an earlier call failed
    with pytest.raises(ValueError, match="call 2 failed"):
        b.close()
    assert [k for k, _ in seen] == [1]


def test_result_pipes_hold_more_than_two_chunks_answers() -> None:
    """A worker's answers wait in its pipe while the parent is busy: the pipe is raised from
    Linux's 64 KiB to 1 MiB where the system allows."""
    import fcntl
    import os

    from dsreg._util import parallel

    r, w = os.pipe()
    try:
        parallel._roomy(w)
        size = fcntl.fcntl(w, getattr(fcntl, "F_GETPIPE_SZ", 1032))
        with open("/proc/sys/fs/pipe-max-size") as f:
            most = int(f.read())
        assert size == min(parallel._PIPE_BYTES, most) or size > 1 << 16
    finally:
        os.close(r)
        os.close(w)
