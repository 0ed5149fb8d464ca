"""runtime.held: the table of leases a pool's child holds, as its supervisor reads it."""

from __future__ import annotations

import multiprocessing

from hailq.runtime.held import CELL, HeldLease, HeldTable, exit_cause, held_text

RECEIPT = "01M9534BJXD4W71A9EYKNMQD13.0123456789abcdef.42"
OTHER = "01M9534BJXD4W71A9EYKNMQD14.fedcba9876543210"


def _table(slots: int = 2) -> HeldTable:
    return HeldTable(slots, multiprocessing.get_context("spawn"))


def test_held_leases_are_read_back_once_and_released_ones_are_not() -> None:
    table = _table()
    table.hold("claims", RECEIPT, 2)
    table.hold("photos", OTHER, 1)
    table.hold("photos", OTHER, 1)  # held twice: one cell
    table.hold("more", RECEIPT.replace("13.", "15."), 1)  # full: noted nowhere
    table.release(OTHER)
    table.release(OTHER)  # twice: harmless
    assert table.take() == [HeldLease("claims", RECEIPT, 2)]
    assert table.take() == []  # empty for the slot's next child


def test_a_released_cell_is_used_again() -> None:
    table = _table(1)
    table.hold("claims", RECEIPT, 1)
    table.release(RECEIPT)
    table.hold("photos", OTHER, 3)
    assert table.take() == [HeldLease("photos", OTHER, 3)]


def test_a_cell_cut_by_the_childs_death_is_skipped() -> None:
    table = _table()
    table.hold("claims", RECEIPT, 2)
    table.hold("photos", OTHER, 1)
    cells = table._cells
    cells[CELL + 20] = b"\0"  # the second entry cut short mid-receipt
    assert table.take() == [HeldLease("claims", RECEIPT, 2)]


def test_only_the_shared_cells_go_to_the_child() -> None:
    """The child gets the memory (at spawn: test_child_death.py), never the lock or the
    index of the parent's copy."""
    state = _table().__getstate__()
    assert set(state) == {"slots", "cells"}
    copy = HeldTable.__new__(HeldTable)
    copy.__setstate__(state)
    copy.hold("claims", RECEIPT, 1)
    assert copy.take() == [HeldLease("claims", RECEIPT, 1)]


def test_exit_cause_and_log_text() -> None:
    assert exit_cause(-11) == "signal 11 (SIGSEGV)"
    assert exit_cause(-9) == "signal 9 (SIGKILL)"
    assert exit_cause(1) == "code 1"
    assert exit_cause(139) == "code 139 (128 + SIGSEGV)"  # a shell's way to say it
    assert exit_cause(-60) == "signal 60"
    assert exit_cause(None) == "an unknown status"
    assert held_text([]) == ""
    many = [HeldLease("q", RECEIPT, n) for n in range(12)]
    text = held_text(many, most=2)
    assert text == (" while handling 12 message(s): q/01M9534BJXD4W71A9EYKNMQD13 (attempt 0), "
                    "q/01M9534BJXD4W71A9EYKNMQD13 (attempt 1) and 10 more")
