"""The time windows of tool calls on the node (docs/time-windows.md): the guard every call
of a tool with period forms passes through, and the ``call_windows`` tool that lists the rows
filed.

A call that carries the turn's context gets one CallWindowRow before dispatch, filed as a
``call.window`` entry in the caller's workspace under its principal.  The order is fixed:

1. the turn's context is checked (``invalid memlane/turn: …``; nothing filed, nothing runs);
2. the caller's read scope;
3. the decision (``node.windows.decide``) over the forms of the call's action — no forms, no
   row: the call runs as sent;
4. the arguments the tool would run with (sent, plus a fill's values) are checked by the tool,
   at the turn's clock, with everything it reads to refuse (its own refusal wins; nothing
   filed);
5. the row is filed; a ``refused`` row answers ``{"error": "refused before dispatch: <code>",
   "call_window": <row>}`` and the tool does not run; otherwise the tool runs with the filled
   values at the turn's clock — its open ends close at the turn's now, as the row's do, so it
   runs with the window the row records — and a widened fill to a tool that filters keeps
   only the results in ``asked``.

A call that files no row (no context, or an action without forms) runs as sent, at the node's
clock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from node.access.callers import Caller
from node.errors import Refusal
from node.tools.args import encode
from node.tools.author import Author
from node.tools.timeline_spec import invalid
from node.windows.decide import Call, Decision, decide
from node.windows.forms import Period
from node.windows.spans import TimeSpan
from node.windows.turn import META_KEY, Turn, parse_turn
from protocol.timefmt import TimeFormatError, parse_time

__all__ = [
    "RefusedBeforeDispatch",
    "WindowGuard",
    "trim_results",
    "turn_argument",
]

# A tool's run and its check: the arguments, and the clock the call runs at (the turn's now;
# None: the node's).  The check raises the tool's own refusals, reading what it must.
Run = Callable[[Mapping[str, Any], int | None], Awaitable[dict[str, Any]]]
Check = Callable[[Mapping[str, Any], int], Awaitable[object]]


class RefusedBeforeDispatch(Refusal):
    """A call whose window the tool's facts refuse: it did not run (docs/time-windows.md
    §What the node decides)."""

    def __init__(self, row: dict[str, Any]) -> None:
        super().__init__(f"refused before dispatch: {row['refused']}")
        self.row = row

    def answer(self) -> dict[str, Any]:
        return {"error": self.text, "call_window": self.row}


def turn_argument(tool: str) -> Refusal:
    """A call that sends ``turn`` among its arguments (the turn's context is no argument),
    worded as the tool words an argument it does not take: e_timeline's every refusal but
    its six specified texts is ``Invalid timeline spec: …`` (docs/tools/e_timeline.md
    §Refusals)."""
    where = f"the turn's context travels in _meta under {META_KEY}"
    if tool == "e_timeline":
        return invalid(f"unknown argument turn ({where})")
    return Refusal(f"{tool} does not take turn: {where}")


def _in(value: Any, asked: TimeSpan) -> bool:
    try:
        ms = parse_time(value) if isinstance(value, str) else None
    except TimeFormatError:
        return False
    return ms is not None and asked.start <= ms < asked.end


def trim_results(answer: dict[str, Any], asked: TimeSpan, field: str) -> dict[str, Any]:
    """A widened fill to a tool that declares ``filtersToAsked``: keep the results whose
    ``field`` lies in ``asked``."""
    results = answer.get("results")
    if not isinstance(results, list):
        return answer
    return answer | {"results": [r for r in results if _in(r.get(field), asked)]}


@dataclass(frozen=True, slots=True)
class WindowGuard:
    """The periods the node's tools declare, its zone, and where rows are filed."""

    author: Author
    periods: Mapping[str, Period]
    zone: ZoneInfo

    def turn_of(self, raw: Any) -> Turn:
        if isinstance(raw, Turn):
            return raw
        return parse_turn(raw, clock=self.author.store.wall(), zone=self.zone.key)

    def turn_for(self, caller: Caller, tool: str, raw: Any) -> Turn | None:
        """The turn's context of a call to a tool with period forms, checked (steps 1–2);
        None when there is none."""
        if raw is None or tool not in self.periods:
            return None
        turn = self.turn_of(raw)
        caller.require("read:workspace")
        return turn

    def decision(self, tool: str, args: Mapping[str, Any], turn: Turn) -> Decision | None:
        """Step 3: the decision over the forms of the call's action; None without forms."""
        period = self.periods[tool]
        forms = period.forms_for(args.get("action"))
        if not forms:
            return None
        return decide(Call(tool, args, forms, period.facts, turn, self.zone))

    def _file(self, caller: Caller, row: dict[str, Any]) -> Awaitable[object]:
        payload = {"workspace": caller.workspace, "principal": caller.principal, "row": row}
        return self.author.write("call.window", (encode("call.window", payload), payload))

    async def call(
        self,
        caller: Caller,
        tool: str,
        args: Mapping[str, Any],
        raw: Any,
        *,
        run: Run,
        check: Check,
        trim_field: Callable[[Mapping[str, Any]], str] = lambda _: "ingest_time",
    ) -> dict[str, Any]:
        """Run one call of ``tool`` as its window says (the module's steps 1–5)."""
        turn = self.turn_for(caller, tool, raw)
        found = None if turn is None else self.decision(tool, args, turn)
        if turn is None or found is None:
            return await run(args, None)
        run_args = {**args, **found.values} if found.values else dict(args)
        await check(run_args, turn.now)
        row = found.row.wire()
        filing = self._file(caller, row)
        if found.row.how == "refused":
            await filing
            raise RefusedBeforeDispatch(row)
        try:
            answer = await run(run_args, turn.now)
        finally:
            await filing
        return (
            answer if found.trim is None else trim_results(answer, found.trim, trim_field(run_args))
        )
