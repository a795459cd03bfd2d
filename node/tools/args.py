"""Argument checking shared by the tools: unknown names, types, strict times.

Refusal texts name the argument: ``invalid <name>: <why>``.  Payload limits (lengths, counts)
are the kind registry's (``protocol.kinds``); a ``PayloadError`` becomes the same kind of text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node.errors import Refusal
from protocol.errors import PayloadError
from protocol.kinds import encode_payload
from protocol.timefmt import TimeFormatError, parse_time

__all__ = [
    "check_names",
    "check_unicode",
    "encode",
    "flag",
    "integer",
    "invalid",
    "one_of",
    "optional_time",
    "present",
    "sr_ids",
    "text",
]


def invalid(name: str, why: str) -> Refusal:
    return Refusal(f"invalid {name}: {why}")


def check_unicode(args: Mapping[str, Any]) -> None:
    """Every string sent — a value, an item of a list, a key or value of a map, a name — is
    text UTF-8 can encode: a lone surrogate (``"\\ud800"``, which JSON's ``\\u`` escapes and
    Python's strings can hold) is refused here, once for every tool, rather than failing
    deep in the encoder of the payload, the log or the answer."""
    for name, value in args.items():
        _unicode("argument name", name)
        _unicode(name, value)


def _unicode(name: str, value: object) -> None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise invalid(
                ascii(name)[1:-1],
                f"must be Unicode text: it holds a lone surrogate "
                f"(U+{ord(value[exc.start]):04X}) at character {exc.start}",
            ) from exc
    elif isinstance(value, list | tuple):
        for item in value:
            _unicode(name, item)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _unicode(name, key)
            _unicode(name, item)


def check_names(tool: str, args: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise Refusal(f"{tool} does not take {', '.join(unknown)}")


def present(args: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
    """The named arguments that were sent (``None`` counts as not sent)."""
    return {k: v for k, v in args.items() if k in names and v is not None}


def optional_time(args: Mapping[str, Any], name: str) -> int | None:
    """A strict instant or bare date (midnight UTC) → ms, or None when not sent."""
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(name, "must be an ISO-8601 instant or a YYYY-MM-DD date")
    try:
        ms = parse_time(value)
    except TimeFormatError as exc:
        raise invalid(name, str(exc)) from exc
    if ms < 0:
        raise invalid(name, "must not be before 1970-01-01")
    return ms


def encode(kind: str, payload: dict[str, Any]) -> bytes:
    try:
        return encode_payload(kind, payload)
    except PayloadError as exc:
        raise invalid(exc.field or "payload", exc.hint) from exc


def integer(args: Mapping[str, Any], name: str, lo: int, hi: int, default: int) -> int:
    value = args.get(name)
    value = default if value is None else value
    if type(value) is not int or not lo <= value <= hi:
        raise invalid(name, f"must be an integer from {lo} to {hi}")
    return value


def sr_ids(args: Mapping[str, Any], most: int) -> list[str]:
    """``args["sr_ids"]``: a list of at most ``most`` strings."""
    found = args.get("sr_ids")
    if not isinstance(found, list) or len(found) > most:
        raise invalid("sr_ids", f"must be a list of at most {most} SR ids")
    if not all(isinstance(i, str) for i in found):
        raise invalid("sr_ids", "must hold strings")
    return found


def flag(args: Mapping[str, Any], name: str, default: bool) -> bool:
    value = args.get(name)
    value = default if value is None else value
    if type(value) is not bool:
        raise invalid(name, "must be true or false")
    return value


def text(args: Mapping[str, Any], name: str, max_len: int) -> str | None:
    """A string of 1 to ``max_len`` characters, or None when not sent."""
    value = args.get(name)
    if value is not None and (not isinstance(value, str) or not 1 <= len(value) <= max_len):
        raise invalid(name, f"must be a string of 1 to {max_len} characters")
    return value


def one_of(args: Mapping[str, Any], name: str, choices: tuple[str, ...]) -> str | None:
    value = args.get(name)
    if value is not None and value not in choices:
        raise invalid(name, f"must be one of {', '.join(choices)}")
    return value
