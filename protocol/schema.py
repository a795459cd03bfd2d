"""A small, strict schema language for payload maps (used by ``protocol.kinds``).

Each field type checks one value and raises ``PayloadError`` naming the field.  Types are
exact: ``True`` is not an integer, ``1`` is not a float-only value's problem (numbers accept
both ints and finite floats), text is ``str`` and binary is ``bytes``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from typing_extensions import override

from protocol.errors import PayloadError

__all__ = [
    "Binary",
    "Choice",
    "Field",
    "Flag",
    "Integer",
    "Nested",
    "NestedList",
    "Number",
    "Schema",
    "Text",
    "TextList",
    "TextMap",
]


class _Type(Protocol):
    def ok(self, value: Any, authoring: bool) -> bool:
        """The fast path: is ``value`` valid?  (``check`` then says why not.)"""
        ...

    def check(self, value: Any, name: str, authoring: bool = True) -> None: ...


@dataclass(frozen=True, slots=True)
class Text(_Type):
    max_len: int
    min_len: int = 1
    pattern: str | None = None
    _compiled: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        compiled = re.compile(self.pattern) if self.pattern else None
        object.__setattr__(self, "_compiled", compiled)

    @override
    def ok(self, value: Any, authoring: bool) -> bool:
        return (
            type(value) is str
            and self.min_len <= len(value) <= self.max_len
            and (self._compiled is None or self._compiled.fullmatch(value) is not None)
        )

    @override
    def check(self, value: Any, name: str, authoring: bool = True) -> None:
        if type(value) is not str:
            raise PayloadError("must be text", field=name)
        if not self.min_len <= len(value) <= self.max_len:
            raise PayloadError(f"length must be {self.min_len}–{self.max_len}", field=name)
        if self._compiled is not None and not self._compiled.fullmatch(value):
            raise PayloadError("is not of the expected form", field=name)


@dataclass(frozen=True, slots=True)
class Choice(_Type):
    values: tuple[str, ...]

    @override
    def ok(self, value: Any, authoring: bool) -> bool:
        return type(value) is str and value in self.values

    @override
    def check(self, value: Any, name: str, authoring: bool = True) -> None:
        if type(value) is not str or value not in self.values:
            raise PayloadError(f"must be one of {', '.join(self.values)}", field=name)


@dataclass(frozen=True, slots=True)
class Integer(_Type):
    lo: int
    hi: int

    @override
    def ok(self, value: Any, authoring: bool) -> bool:
        return type(value) is int and self.lo <= value <= self.hi

    @override
    def check(self, value: Any, name: str, authoring: bool = True) -> None:
        if type(value) is not int or not self.lo <= value <= self.hi:
            raise PayloadError(f"must be an integer in [{self.lo}, {self.hi}]", field=name)


@dataclass(frozen=True, slots=True)
class Number(_Type):
    lo: float = -1e15
    hi: float = 1e15

    @override
    def ok(self, value: Any, authoring: bool) -> bool:
        kind = type(value)
        if kind is float:
            return math.isfinite(value) and self.lo <= value <= self.hi
        return kind is int and self.lo <= value <= self.hi

    @override
    def check(self, value: Any, name: str, authoring: bool = True) -> None:
        # ints are always finite; math.isfinite would overflow on ints beyond float range
        if type(value) not in (int, float) or (type(value) is float and not math.isfinite(value)):
            raise PayloadError("must be a finite number", field=name)
        if not self.lo <= value <= self.hi:
            raise PayloadError(f"must be in [{self.lo:g}, {self.hi:g}]", field=name)


@dataclass(frozen=True, slots=True)
class Flag(_Type):
    @override
    def ok(self, value: Any, authoring: bool) -> bool:
        return type(value) is bool

    @override
    def check(self, value: Any, name: str, authoring: bool = True) -> None:
        if type(value) is not bool:
            raise PayloadError("must be true or false", field=name)


@dataclass(frozen=True, slots=True)
class Binary(_Type):
    length: int

    @override
    def ok(self, value: Any, authoring: bool) -> bool:
        return type(value) is bytes and len(value) == self.length

    @override
    def check(self, value: Any, name: str, authoring: bool = True) -> None:
        if type(value) is not bytes or len(value) != self.length:
            raise PayloadError(f"must be {self.length} bytes", field=name)


@dataclass(frozen=True, slots=True)
class TextList(_Type):
    item: Text
    max_items: int
    min_items: int = 0
    unique: bool = True

    def ok(self, value: Any, authoring: bool) -> bool:
        return (
            type(value) is list
            and self.min_items <= len(value) <= self.max_items
            and all(self.item.ok(v, authoring) for v in value)
            and (not self.unique or len(set(value)) == len(value))
        )

    @override
    def check(self, value: Any, name: str, authoring: bool = True) -> None:
        if type(value) is not list or not self.min_items <= len(value) <= self.max_items:
            raise PayloadError(f"must be a list of {self.min_items}–{self.max_items}", field=name)
        for i, v in enumerate(value):
            self.item.check(v, f"{name}[{i}]")
        if self.unique and len(set(value)) != len(value):
            raise PayloadError("must not repeat an item", field=name)


@dataclass(frozen=True, slots=True)
class TextMap(_Type):
    key: Text
    value: Text
    max_keys: int

    def ok(self, value: Any, authoring: bool) -> bool:
        return (
            type(value) is dict
            and len(value) <= self.max_keys
            and all(
                self.key.ok(k, authoring) and self.value.ok(v, authoring) for k, v in value.items()
            )
        )

    @override
    def check(self, value: Any, name: str, authoring: bool = True) -> None:
        if type(value) is not dict or len(value) > self.max_keys:
            raise PayloadError(f"must be a map of at most {self.max_keys} keys", field=name)
        for k, v in value.items():
            self.key.check(k, f"{name} key")
            self.value.check(v, f"{name}.{k}")


@dataclass(frozen=True, slots=True)
class Nested(_Type):
    schema: Schema

    def ok(self, value: Any, authoring: bool) -> bool:
        return self.schema.ok(value, authoring)

    def check(self, value: Any, name: str, authoring: bool = True) -> None:
        self.schema.check(value, authoring=authoring, prefix=f"{name}.")


@dataclass(frozen=True, slots=True)
class NestedList(_Type):
    schema: Schema
    max_items: int
    min_items: int = 0

    def ok(self, value: Any, authoring: bool) -> bool:
        return (
            type(value) is list
            and self.min_items <= len(value) <= self.max_items
            and all(self.schema.ok(v, authoring) for v in value)
        )

    def check(self, value: Any, name: str, authoring: bool = True) -> None:
        if type(value) is not list or not self.min_items <= len(value) <= self.max_items:
            raise PayloadError(f"must be a list of {self.min_items}–{self.max_items}", field=name)
        for i, v in enumerate(value):
            self.schema.check(v, authoring=authoring, prefix=f"{name}[{i}].")


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: _Type
    required: bool = False
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class Schema:
    fields: tuple[Field, ...]
    by_name: Mapping[str, Field] = field(init=False, repr=False, compare=False)
    required: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {f.name: f for f in self.fields})
        object.__setattr__(self, "required", tuple(f.name for f in self.fields if f.required))

    def ok(self, value: Any, authoring: bool) -> bool:
        """The fast path of ``check``: True when ``value`` is valid."""
        if type(value) is not dict:
            return False
        for name in self.required:
            if name not in value:
                return False
        by_name = self.by_name
        for k, v in value.items():
            f = by_name.get(k)
            if f is None:
                if authoring or type(k) is not str:
                    return False
            elif v is None:
                if not f.nullable:
                    return False
            elif not f.type.ok(v, authoring):
                return False
        return True

    def check(self, value: Any, *, authoring: bool, prefix: str = "") -> None:
        """Validate a map.  Unknown keys are refused when authoring, ignored on receipt
        (a later schema version may add optional fields; readers ignore them)."""
        if self.ok(value, authoring):
            return
        if type(value) is not dict:
            raise PayloadError("must be a map", field=prefix.rstrip(".") or "payload")
        for name in self.required:
            if name not in value:
                raise PayloadError("is required", field=prefix + name)
        for k, v in value.items():
            f = self.by_name.get(k)
            if f is None:
                if type(k) is not str:
                    raise PayloadError("keys must be text", field=prefix or "payload")
                if authoring:
                    raise PayloadError("is not a field of this kind", field=prefix + k)
            elif v is None:
                if not f.nullable:
                    raise PayloadError("must not be null", field=prefix + k)
            else:
                f.type.check(v, prefix + k, authoring)
        # ``ok`` and the checks above agree; if they ever did not, refuse rather than pass.
        raise PayloadError("is not valid", field=prefix.rstrip(".") or "payload")
