"""e_timeline's results are spelled when the SR view writes an SR (``shown``, with dates
spelled once per day); the spelling agrees with the plain definitions everywhere."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from node.views import shown as module
from node.views.fold import SrState, lane_uuid_of
from node.views.shown import instant as _instant
from node.views.shown import shown
from protocol.clock import MAX_WALL_MS
from protocol.timefmt import format_instant

_ms = st.integers(min_value=0, max_value=MAX_WALL_MS)


@given(_ms)
def test_instant_spells_as_format_instant(ms: int) -> None:
    assert _instant(ms) == format_instant(ms)


def test_instant_at_the_edges() -> None:
    for ms in (0, 1, 10, 100, 999, 1_000, 86_399_999, 86_400_000, MAX_WALL_MS):
        assert _instant(ms) == format_instant(ms)
    assert _instant(None) is None


def test_the_date_cache_stays_bounded() -> None:
    for day in range(module._MAX_DATES + 10):
        assert _instant(day * 86_400_000 + 1) == format_instant(day * 86_400_000 + 1)
    assert len(module._DATES) <= module._MAX_DATES


@given(
    content=st.none() | _ms,
    created=_ms,
    later=st.integers(min_value=0, max_value=10**9),
    lane=st.sampled_from(["default", "research"]),
    lane_uuid=st.none() | st.uuids().map(str),
    tags=st.lists(st.text(max_size=8), max_size=3),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_shown_spells_every_field(
    content: int | None,
    created: int,
    later: int,
    lane: str,
    lane_uuid: str | None,
    tags: list[str],
    flags: tuple[bool, bool, bool],
) -> None:
    state = SrState(
        "01890000-0000-7000-8000-000000000001",
        exists=True,
        workspace="team",
        owner="a",
        created_time=created,
        title="t",
        text="x",
        tags=tuple(tags),
        content_time=content,
        lane=lane,
        lane_uuid=lane_uuid,
        conversational=flags[0],
        has_correction=flags[1],
        has_adjustment=flags[2],
        ingest_time=min(created + later, MAX_WALL_MS),
        node_id="wq4p-pqrr-6duy-bcwi",
    )
    assert shown(state) == {
        "sr_id": state.sr_id,
        "title": "t",
        "text": "x",
        "lane": lane,
        "lane_uuid": lane_uuid or lane_uuid_of("team", lane),
        "content_time": None if content is None else format_instant(content),
        "ingest_time": format_instant(state.ingest_time or 0),
        "created_time": format_instant(created),
        "tags": tags,
        "conversational": flags[0],
        "has_correction": flags[1],
        "has_adjustment": flags[2],
        "caller": "a",
        "node_id": "wq4p-pqrr-6duy-bcwi",
    }
