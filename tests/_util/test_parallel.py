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
