"""What the sections' keys are read as: durations, addresses, positive bounds and timeouts,
each problem added to the list a configuration is checked with; ``InvalidConfig``, which
carries them all."""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

from node.address import Listen, parse_listen
from node.errors import ConfigError

__all__ = [
    "MAX_TIMEOUT_MS",
    "InvalidConfig",
    "count_keys",
    "parse_duration_ms",
    "read_address",
    "read_bounds",
    "read_timeout",
]


def count_keys(cls: type) -> tuple[str, ...]:
    """The integer bounds of a limits class (a ``*_ms`` field is a duration key)."""
    return tuple(f.name for f in fields(cls) if not f.name.endswith("_ms"))


class InvalidConfig(ConfigError):
    """A configuration with problems; ``problems`` lists every one of them, ``sources`` where
    each comes from (``where``, the file, unless a ``MEMLANE_*`` variable set the value) and
    ``lines`` each as ``SOURCE: PROBLEM``."""

    def __init__(self, where: str, problems: list[str], sources: list[str] | None = None) -> None:
        self.where = where
        self.problems = problems
        self.sources = sources or [where] * len(problems)
        self.lines = [f"{s}: {p}" for s, p in zip(self.sources, problems, strict=True)]
        super().__init__("; ".join(self.lines))


_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration_ms(text: str) -> int:
    """``^[1-9][0-9]*[smhdw]$`` (docs/time-windows.md §Declaring period forms) → milliseconds."""
    m = re.fullmatch(r"([1-9][0-9]*)([smhdw])", text) if isinstance(text, str) else None
    if m is None:
        raise ConfigError(f"{text!r} is not a duration like 30s, 5m, 2h, 1d or 1w")
    return int(m[1]) * _UNIT_MS[m[2]]


MAX_TIMEOUT_MS = 10 * 60_000


def read_address(text: Any, where: str, problems: list[str], *, any_port: bool) -> Listen | None:
    """``"HOST:PORT"`` as a ``Listen`` (port 0 only with ``any_port``); None when it is not."""
    try:
        if not isinstance(text, str):
            raise ValueError(f'{text!r} is not a "HOST:PORT" string')
        address = parse_listen(text)
        if not any_port and address.port == 0:
            raise ValueError(f"{text!r} names no port")
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        return None
    return address


def read_bounds(
    raw: dict[str, Any], keys: tuple[str, ...], table: str, problems: list[str]
) -> dict[str, int]:
    """The ``keys`` of ``raw`` that are set, each a positive integer."""
    values = {key: raw[key] for key in keys if key in raw}
    for key, value in values.items():
        if type(value) is not int or value < 1:
            problems.append(f"{table}.{key} must be a positive integer")
    return values


def read_timeout(raw: dict[str, Any], key: str, table: str, problems: list[str]) -> dict[str, int]:
    """``{key}_ms`` from a duration key, at most ten minutes; nothing when it is absent."""
    if key not in raw:
        return {}
    try:
        ms = parse_duration_ms(raw[key])
    except ConfigError as exc:
        problems.append(f"{table}.{key}: {exc}")
        return {}
    if ms > MAX_TIMEOUT_MS:
        problems.append(f"{table}.{key} must be at most 10m")
    return {f"{key}_ms": ms}
