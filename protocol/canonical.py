"""Canonical msgpack: one encoding per value, and strict, bounded decoding.

Signed bytes must have exactly one spelling, or two nodes could disagree about an id.  The rule
(docs/entries.md §Canonical encoding): msgpack as ``msgpack.packb(use_bin_type=True)`` writes it
— smallest integer and length forms, ``bin`` for bytes, ``str`` for text — maps with their keys
sorted, no ext types.  A decoder accepts bytes only if re-encoding the decoded value gives the
same bytes back, so padded integers, ``str`` used for bytes, unsorted maps or trailing data are
all refused.
"""

from __future__ import annotations

from typing import Any

import msgpack

from protocol.errors import RemoteProtocolError

__all__ = ["MAX_DOCUMENT_BYTES", "decode_canonical", "encode_canonical"]

# The largest canonical document (a header or a payload) anything here will decode.
MAX_DOCUMENT_BYTES = 1 << 20


_CONTAINERS = (dict, list, tuple)


def _sorted(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        try:
            keys = sorted(value)
        except TypeError:
            keys = sorted(value, key=_key_order)
        return {k: _sorted(value[k]) for k in keys}
    if kind is list or kind is tuple:
        if any(type(v) in _CONTAINERS for v in value):
            return [_sorted(v) for v in value]
        return value
    return value


def _key_order(key: Any) -> tuple[int, Any]:
    # Keys are text in every map we sign; bytes sort after text so mixed maps stay total.
    return (0, key) if isinstance(key, str) else (1, bytes(key))


class _NotCanonical(ValueError):
    pass


def _sorted_map(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    """Build a decoded map, refusing keys out of canonical order or repeated — so that
    re-encoding what was decoded, as is, reproduces canonical bytes exactly."""
    value = dict(pairs)
    keys = list(value)
    if len(keys) != len(pairs):
        raise _NotCanonical("a map key is repeated")
    try:
        ordered = sorted(keys)
    except TypeError:  # text and bytes keys together
        ordered = sorted(keys, key=_key_order)
    if keys != ordered:
        raise _NotCanonical("map keys are out of order")
    return value


def _refuse_ext(code: int, _data: bytes) -> Any:
    # No ext types at all: max_ext_len=0 still lets a zero-length ext through.
    raise ValueError(f"ext type {code} is not allowed")


def encode_canonical(value: Any) -> bytes:
    """The one canonical encoding of ``value`` (maps sorted, tuples as arrays)."""
    packed: bytes = msgpack.packb(_sorted(value), use_bin_type=True, strict_types=False)
    return packed


def decode_canonical(data: bytes, *, what: str, max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """Decode one canonical msgpack document or raise ``RemoteProtocolError``.

    Limits are set before anything is read, so hostile lengths cannot allocate.
    """
    if len(data) > max_bytes:
        raise RemoteProtocolError(f"{len(data)} bytes exceeds the limit of {max_bytes}", field=what)
    try:
        value = msgpack.unpackb(
            data,
            raw=False,
            use_list=True,
            strict_map_key=True,
            max_bin_len=max_bytes,
            max_str_len=max_bytes,
            max_array_len=max_bytes,
            max_map_len=max_bytes // 2,
            max_ext_len=0,
            ext_hook=_refuse_ext,
            object_pairs_hook=_sorted_map,
        )
    except _NotCanonical as exc:
        raise RemoteProtocolError(f"not canonical msgpack ({exc})", field=what) from exc
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as exc:
        raise RemoteProtocolError(
            f"not a msgpack document ({type(exc).__name__})", field=what
        ) from exc
    # Maps arrived in canonical order (checked above), so plain packing re-encodes them.
    try:
        again = msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise RemoteProtocolError("not canonical msgpack", field=what) from exc
    if again != data:
        raise RemoteProtocolError("not canonical msgpack (re-encodes differently)", field=what)
    return value
