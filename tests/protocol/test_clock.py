"""Hybrid logical clock: monotonic whatever the wall does, bounded by max skew on receipt."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from protokit import BASE_WALL, FAST

from protocol.clock import DEFAULT_MAX_SKEW_MS, MAX_COUNTER, MAX_WALL_MS, Hlc, HybridClock

HOUR = 3_600_000
walls = st.integers(-1000, MAX_WALL_MS + 1000)


@pytest.mark.parametrize(
    ("wall", "counter"),
    [
        (-1, 0),
        (MAX_WALL_MS + 1, 0),
        (0, -1),
        (0, MAX_COUNTER + 1),
        (True, 0),
        (0, False),
        (1.0, 0),
        ("1", 0),
    ],
)
def test_hlc_fields_are_range_checked(wall: object, counter: object) -> None:
    with pytest.raises(ValueError, match="hlc"):
        Hlc(wall, counter)  # type: ignore[arg-type]


def test_hlc_orders_by_wall_then_counter() -> None:
    assert Hlc(1, 5) < Hlc(2, 0) < Hlc(2, 1)
    assert Hlc(MAX_WALL_MS, MAX_COUNTER) == max(Hlc(0), Hlc(MAX_WALL_MS, MAX_COUNTER))


def test_now_follows_the_wall_and_counts_within_a_millisecond() -> None:
    clock = HybridClock()
    assert clock.now(BASE_WALL) == Hlc(BASE_WALL, 0)
    assert clock.now(BASE_WALL) == Hlc(BASE_WALL, 1)
    assert clock.now(BASE_WALL - 50) == Hlc(BASE_WALL, 2)
    assert clock.now(BASE_WALL + 1) == Hlc(BASE_WALL + 1, 0)
    assert clock.last == Hlc(BASE_WALL + 1, 0)


@FAST
@given(st.lists(walls, min_size=1, max_size=60))
def test_now_is_strictly_monotonic_for_any_walls(ws: list[int]) -> None:
    for series in (ws, sorted(ws), sorted(ws, reverse=True)):
        clock = HybridClock()
        stamps = [clock.now(w) for w in series]
        assert all(a < b for a, b in itertools.pairwise(stamps))
        assert all(
            s.wall >= min(max(w, 0), MAX_WALL_MS) for s, w in zip(stamps, series, strict=True)
        )


@FAST
@given(st.lists(st.tuples(st.booleans(), walls, st.integers(0, MAX_WALL_MS)), max_size=40))
def test_updates_never_move_the_clock_backwards(steps: list[tuple[bool, int, int]]) -> None:
    clock = HybridClock(Hlc(BASE_WALL, 3))
    before = clock.last
    for is_update, wall, received in steps:
        if is_update:
            clock.update(Hlc(received), max(wall, 0))
            assert clock.last >= before
        else:
            assert clock.now(wall) > before
        before = clock.last


def test_a_timestamp_an_hour_ahead_moves_the_clock_not_at_all() -> None:
    clock = HybridClock(Hlc(BASE_WALL, 0))
    assert clock.update(Hlc(BASE_WALL + HOUR, 9), BASE_WALL) is False
    assert clock.last == Hlc(BASE_WALL, 0)  # not even up to the bound
    assert clock.now(BASE_WALL) == Hlc(BASE_WALL, 1)


def test_a_timestamp_just_beyond_the_skew_moves_the_clock_not_at_all() -> None:
    clock = HybridClock(Hlc(BASE_WALL, 0))
    assert clock.update(Hlc(BASE_WALL + DEFAULT_MAX_SKEW_MS + 1), BASE_WALL) is False
    assert clock.last == Hlc(BASE_WALL, 0)


def test_max_skew_is_configurable() -> None:
    clock = HybridClock(max_skew_ms=10)
    assert clock.update(Hlc(BASE_WALL + 11), BASE_WALL) is False
    assert clock.last == Hlc(0)
    assert clock.update(Hlc(BASE_WALL + 10, 4), BASE_WALL) is True
    assert clock.last == Hlc(BASE_WALL + 10, 4)


def test_a_timestamp_within_the_skew_is_followed() -> None:
    clock = HybridClock(Hlc(BASE_WALL, 0))
    received = Hlc(BASE_WALL + DEFAULT_MAX_SKEW_MS, 7)
    assert clock.update(received, BASE_WALL) is True
    assert clock.last == received
    assert clock.now(BASE_WALL) == Hlc(received.wall, 8)
    assert clock.now(BASE_WALL + 1) > received


def test_an_old_timestamp_leaves_the_clock_alone() -> None:
    clock = HybridClock(Hlc(BASE_WALL, 5))
    assert clock.update(Hlc(BASE_WALL - HOUR, 0), BASE_WALL) is True
    assert clock.last == Hlc(BASE_WALL, 5)


def test_counter_overflow_rolls_to_the_next_millisecond() -> None:
    clock = HybridClock(Hlc(BASE_WALL, MAX_COUNTER - 1))
    assert clock.now(BASE_WALL) == Hlc(BASE_WALL, MAX_COUNTER)
    assert clock.now(BASE_WALL) == Hlc(BASE_WALL + 1, 0)
    assert clock.now(BASE_WALL - 5) == Hlc(BASE_WALL + 1, 1)


def test_the_clock_stays_monotonic_at_the_last_spellable_instant() -> None:
    clock = HybridClock()
    first = clock.now(MAX_WALL_MS + 5)
    assert first == Hlc(MAX_WALL_MS, 0)
    assert clock.now(MAX_WALL_MS + 5) == Hlc(MAX_WALL_MS, 1)
    assert clock.update(Hlc(MAX_WALL_MS, 9), MAX_WALL_MS) is True
    assert clock.now(MAX_WALL_MS + 9) == Hlc(MAX_WALL_MS, 10)


def test_negative_walls_count_as_zero() -> None:
    clock = HybridClock()
    assert clock.now(-5) == Hlc(0, 1)
    assert clock.now(0) == Hlc(0, 2)
