"""Strict instant and date text: what is accepted, what is refused, how instants are spelled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from protokit import FAST

from protocol.clock import MAX_WALL_MS
from protocol.timefmt import (
    ParsedInstant,
    TimeFormatError,
    fixed_millis,
    format_instant,
    parse_date,
    parse_instant,
    parse_time,
)

EIGHT_UTC = 1_791_532_800_000  # 2026-10-09T08:00:00Z
HOUR = 3_600_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "ms", "offset", "precision"),
    [
        ("2026-10-09T08:00Z", EIGHT_UTC, 0, "minute"),
        ("2026-10-09T08:00:00Z", EIGHT_UTC, 0, "second"),
        ("2026-10-09T08:00:00-07:00", EIGHT_UTC + 7 * HOUR, -420, "second"),
        ("2026-10-09T08:00+05:30", EIGHT_UTC - 5 * HOUR - 1_800_000, 330, "minute"),
        ("2026-10-09T08:00:00+00:00", EIGHT_UTC, 0, "second"),
        ("2026-10-09T08:00:00-00:00", EIGHT_UTC, 0, "second"),
        ("2026-10-09T08:00:00+23:59", EIGHT_UTC - 24 * HOUR + 60_000, 1439, "second"),
        ("1970-01-01T00:00Z", 0, 0, "minute"),
        ("9999-12-31T23:59:59.999Z", MAX_WALL_MS, 0, "fraction"),
        ("2024-02-29T12:00Z", 1_709_208_000_000, 0, "minute"),
        ("2000-02-29T00:00Z", 951_782_400_000, 0, "minute"),
    ],
)
def test_strict_instants_are_accepted(text: str, ms: int, offset: int, precision: str) -> None:
    assert parse_instant(text) == ParsedInstant(ms, offset, precision)  # type: ignore[arg-type]
    assert parse_time(text) == ms


@pytest.mark.parametrize(
    ("digits", "ms", "sub_ms"),
    [
        ("1", 100, False),
        ("12", 120, False),
        ("123", 123, False),
        ("1230", 123, False),
        ("1234", 123, True),
        ("12345", 123, True),
        ("000001", 0, True),
        ("123456789", 123, True),
        ("999999999", 999, True),
        ("000000000", 0, False),
    ],
)
def test_fractions_of_one_to_nine_digits(digits: str, ms: int, sub_ms: bool) -> None:
    got = parse_instant(f"2026-10-09T08:00:00.{digits}Z")
    assert got == ParsedInstant(EIGHT_UTC + ms, 0, "fraction", sub_ms)


@pytest.mark.parametrize(
    "text",
    [
        "2026-10-09t08:00Z",
        "2026-10-09T08:00z",
        "2026-10-09 08:00Z",
        "2026-10-09T24:00Z",
        "2026-10-09T23:60Z",
        "2026-10-09T23:59:60Z",
        "2026-02-30T00:00Z",
        "2025-02-29T00:00Z",
        "1900-02-29T00:00Z",
        "2026-04-31T00:00Z",
        "2026-13-01T00:00Z",
        "2026-00-10T00:00Z",
        "2026-10-00T00:00Z",
        "0000-01-01T00:00Z",
        "2026-10-09T08:00:00",
        "2026-10-09T08:00",
        "2026-10-09T08:00 PST",
        "2026-10-09T08:00PST",
        "2026-10-09T08:00+0530",
        "2026-10-09T08:00+05",
        "2026-10-09T08:00+24:00",
        "2026-10-09T08:00+05:60",
        "2026-10-09T08:00:00.1234567890Z",
        "2026-10-09T08:00:00.Z",
        "2026-10-09T08:00.5Z",
        "2026-10-09T8:00Z",
        "26-10-09T08:00Z",
        "+2026-10-09T08:00Z",
        "2026-10-09T08:00Z\n",
        " 2026-10-09T08:00Z",
        "2026-10-09T08:00:00,5Z",
        "2026-10-09",
        "",
        "now",
        "２０２６-１０-０９T08:00Z",
        "٢٠٢٦-10-09T08:00Z",
        "2026-10-09T08:00+٠٥:٣٠",
    ],
)
def test_loose_instants_are_refused(text: str) -> None:
    with pytest.raises(TimeFormatError):
        parse_instant(text)


@pytest.mark.parametrize("value", [None, 1_791_532_800_000, b"2026-10-09T08:00Z"])
def test_non_text_is_refused(value: object) -> None:
    with pytest.raises(TimeFormatError):
        parse_instant(value)  # type: ignore[arg-type]
    with pytest.raises(TimeFormatError):
        parse_date(value)  # type: ignore[arg-type]


def test_bare_dates_only_through_parse_date_and_parse_time() -> None:
    midnight = EIGHT_UTC - 8 * HOUR
    assert parse_date("2026-10-09") == midnight
    assert parse_time("2026-10-09") == midnight
    assert parse_date("1970-01-01") == 0
    assert parse_date("2024-02-29") == 1_709_164_800_000
    with pytest.raises(TimeFormatError):
        parse_date("2026-10-09T00:00Z")


@pytest.mark.parametrize(
    "text",
    [
        "2026-2-09",
        "2026-02-30",
        "2025-02-29",
        "20261009",
        "2026-10-09 ",
        "２０２６-10-09",
        "0000-01-01",
    ],
)
def test_loose_dates_are_refused(text: str) -> None:
    with pytest.raises(TimeFormatError):
        parse_date(text)
    with pytest.raises(TimeFormatError):
        parse_time(text)


@pytest.mark.parametrize(
    ("ms", "offset", "text"),
    [
        (EIGHT_UTC, 0, "2026-10-09T08:00:00Z"),
        (EIGHT_UTC + 500, 0, "2026-10-09T08:00:00.5Z"),
        (EIGHT_UTC + 120, 0, "2026-10-09T08:00:00.12Z"),
        (EIGHT_UTC + 7, 0, "2026-10-09T08:00:00.007Z"),
        (EIGHT_UTC, -420, "2026-10-09T01:00:00-07:00"),
        (EIGHT_UTC, 330, "2026-10-09T13:30:00+05:30"),
        (EIGHT_UTC, -1439, "2026-10-08T08:01:00-23:59"),
        (0, 0, "1970-01-01T00:00:00Z"),
        (MAX_WALL_MS, 0, "9999-12-31T23:59:59.999Z"),
        (-1, 0, "1969-12-31T23:59:59.999Z"),
    ],
)
def test_format_instant_spelling(ms: int, offset: int, text: str) -> None:
    assert format_instant(ms, offset) == text


def test_format_drops_the_offset_and_trailing_zeros() -> None:
    ms = parse_instant("2026-10-09T08:00:00.120-07:00").ms
    assert format_instant(ms) == "2026-10-09T15:00:00.12Z"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("2026-10-09T11:01:24.66Z", "2026-10-09T11:01:24.660Z"),
        ("2026-10-09T11:01:24.661Z", "2026-10-09T11:01:24.661Z"),
        ("2026-10-09T11:01:24.5Z", "2026-10-09T11:01:24.500Z"),
        ("2026-10-09T11:01:24Z", "2026-10-09T11:01:24.000Z"),
        ("2026-10-09T01:00:00-07:00", "2026-10-09T01:00:00.000-07:00"),
        ("2026-10-09T11:01:24.6612Z", "2026-10-09T11:01:24.6612Z"),  # finer: as it is
        ("2026-10-09", "2026-10-09"),
        ("the plan", "the plan"),
    ],
)
def test_fixed_millis_lines_instants_up(text: str, shown: str) -> None:
    assert fixed_millis(text) == shown


@FAST
@given(st.integers(0, MAX_WALL_MS))
def test_fixed_millis_is_as_wide_and_means_the_same(ms: int) -> None:
    shown = fixed_millis(format_instant(ms))
    assert len(shown) == len("2026-10-09T11:01:24.661Z")
    assert parse_instant(shown).ms == ms
    assert format_instant(ms, fixed=True) == shown


@FAST
@given(st.integers(0, MAX_WALL_MS), st.integers(-1439, 1439))
def test_format_then_parse_round_trips(ms: int, offset: int) -> None:
    assume(ms + offset * 60_000 <= MAX_WALL_MS)  # a local year past 9999 has no spelling
    text = format_instant(ms, offset)
    precision = "fraction" if ms % 1000 else "second"
    assert parse_instant(text) == ParsedInstant(ms, offset, precision)
    assert text.endswith("Z") == (offset == 0)


_naive = st.datetimes(datetime(2, 1, 1), datetime(9998, 12, 31, 23, 59, 59, 999_999))
_offsets = st.integers(-1439, 1439)
_fractions = st.integers(1, 9).flatmap(lambda n: st.text("0123456789", min_size=n, max_size=n))


def _spell(dt: datetime, offset: int, precision: int, frac: str, zulu: bool) -> str:
    text = f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}"
    if precision >= 1:
        text += f":{dt.second:02d}" + (f".{frac}" if precision == 2 else "")
    if offset == 0 and zulu:
        return text + "Z"
    sign = "-" if offset < 0 else "+"
    return text + f"{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"


@FAST
@given(_naive, _offsets, st.integers(0, 2), _fractions, st.booleans())
def test_parse_instant_agrees_with_fromisoformat(
    dt: datetime, offset: int, precision: int, frac: str, zulu: bool
) -> None:
    text = _spell(dt, offset, precision, frac, zulu)
    want = datetime.fromisoformat(text)
    got = parse_instant(text)
    assert got.ms == (want - EPOCH) // timedelta(milliseconds=1)
    assert got.offset_minutes * 60 == want.utcoffset().total_seconds()  # type: ignore[union-attr]
    assert got.precision == ("minute", "second", "fraction")[precision]
