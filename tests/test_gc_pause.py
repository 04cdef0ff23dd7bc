"""The collector is paused inside the block and left as it was after it."""

from __future__ import annotations

import gc

import pytest

import parsers
from logbook.gc_pause import paused_gc


def test_paused_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves the outer pause alone
    assert gc.isenabled()


def test_restored_after_an_error() -> None:
    with pytest.raises(ValueError, match="boom"), paused_gc():
        raise ValueError("boom")
    assert gc.isenabled()


def test_left_disabled_when_it_was(tmp_path) -> None:
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_read_log_restores_the_collector_on_bad_input(tmp_path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(parsers.InputError, match="file is empty"):
        parsers.read_log(empty)
    assert gc.isenabled()
