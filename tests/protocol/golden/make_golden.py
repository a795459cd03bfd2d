"""Regenerate entries.json, the golden vectors that pin the entry format (docs/entries.md).

Run ``.venv/bin/python tests/protocol/golden/make_golden.py`` only when the format changes on
purpose; ``--check`` exits 1 if the checked-in file differs from what this script would write.
The tests never run this script: they compare the protocol against the checked-in file.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from protocol.canonical import encode_canonical
from protocol.clock import MAX_COUNTER, Hlc
from protocol.entry import Entry
from protocol.kinds import encode_payload, is_known
from protocol.signing import SigningKey, seal

OUT = Path(__file__).with_name("entries.json")
SEED = bytes(range(32))
MESH = b"\x11" * 16
EPOCH = b"\x22" * 8
WALL = 1_791_504_000_000  # 2026-10-09T00:00:00Z

SR_ID = "0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b"
SR = {"sr_id": SR_ID, "workspace": "team", "principal": "ana"}
EP = {"id": "0192a3b4-c5d6-7e8f-9a0b-000000000001", "vault": "team", "caller": "agent-1"}
NODE = b"\x33" * 32
RANGE = {"from": "2026-10-08T00:00:00Z", "to": "2026-10-09T00:00:00Z"}

# (name, kind, payload, (hlc wall offset ms, hlc counter)) in log order, seq 1, 2, ...
VECTORS: list[tuple[str, str, dict[str, Any], tuple[int, int]]] = [
    (
        "member.add, seq 1 without prev",
        "member.add",
        {"node": NODE, "workspaces": ["*"], "cert_expires": WALL + 86_400_000, "label": "laptop"},
        (0, 0),
    ),
    (
        "sr.put creating an SR",
        "sr.put",
        {
            **SR,
            "create": True,
            "title": "Deploy notes",
            "text": "Grüße ✓ — café",
            "tags": ["ops", "deploy"],
            "content_time": WALL - 3_600_000,
            "visibility": "workspace",
        },
        (1_000, 0),
    ),
    (
        "sr.put updating, same wall, counter 1",
        "sr.put",
        {
            **SR,
            "create": False,
            "links": ["0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6c"],
            "conversational": False,
            "private_fields": {"b": "2", "a": "1"},
            "lane": "work",
            "lane_uuid": "0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6d",
        },
        (1_000, 1),
    ),
    (
        "sr.correct",
        "sr.correct",
        {**SR, "reason": "wrong host", "text": "host is db-2"},
        (2_000, 0),
    ),
    ("sr.adjust", "sr.adjust", {**SR, "tags": [], "visibility": "private"}, (3_000, 0)),
    (
        "episode.record with nulls and floats",
        "episode.record",
        {
            **EP,
            "session_id": "s-1",
            "channel": "cli",
            "episode_type": "task",
            "tool": None,
            "error_code": None,
            "duration_ms": 1234,
            "result_size": 0,
            "summary": "",
            "tags": ["t"],
            "expires_at": None,
            "prev_id": None,
            "task_result": 0.75,
            "trust": 0.5,
            "status": "ok",
        },
        (4_000, 0),
    ),
    (
        "episode.amend",
        "episode.amend",
        {
            **EP,
            "task_result": -2,
            "verdict_at": WALL + 5_000,
            "eligibility": "eligible",
            "trust": None,
        },
        (5_000, 0),
    ),
    ("episode.forget", "episode.forget", dict(EP), (6_000, 0)),
    (
        "call.window with nested rows",
        "call.window",
        {
            "workspace": "team",
            "principal": "ana",
            "row": {
                "kind": "call-window",
                "turn": 3,
                "iteration": 1,
                "toolCallId": "call_9",
                "toolName": "e_timeline",
                "how": "bound",
                "form": 2,
                "asked": RANGE,
                "person": {**RANGE, "source": "said", "mention": 1},
                "by": "quote",
                "rounded": True,
                "sent": RANGE,
                "differs": {"extra": [RANGE]},
            },
        },
        (7_000, 0),
    ),
    (
        "unknown kind x.future",
        "x.future",
        {"hello": "world", "n": 7, "nested": {"b": 1, "a": [1, -1, None]}, "raw": b"\x00\xff"},
        (8_000, 0),
    ),
    (
        "member.revoke, counter at its maximum",
        "member.revoke",
        {"node": NODE, "last_epoch": b"\x44" * 8, "last_seq": 41},
        (9_000, MAX_COUNTER),
    ),
    (
        "member.revoke without last_epoch, large wall",
        "member.revoke",
        {"node": NODE, "last_epoch": None, "last_seq": 0},
        (10**9, 0),
    ),
    # Appended: the vectors before it keep their bytes.
    (
        "sr.erase naming two entries",
        "sr.erase",
        {**SR, "entries": ["0f" * 32, "e1" * 32], "reason": "asked to be forgotten"},
        (10**9 + 1, 0),
    ),
]


def to_json(value: Any) -> Any:
    """JSON form of a payload value; bytes become {"$bin": hex}."""
    if isinstance(value, bytes):
        return {"$bin": value.hex()}
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    return value


def encode(kind: str, payload: dict[str, Any]) -> bytes:
    return encode_payload(kind, payload) if is_known(kind) else encode_canonical(payload)


def vector(name: str, entry: Entry, payload: dict[str, Any]) -> dict[str, Any]:
    h = entry.header
    assert entry.payload is not None
    fields = {
        "v": h.v,
        "mesh": h.mesh.hex(),
        "writer": h.writer.hex(),
        "epoch": h.epoch.hex(),
        "seq": h.seq,
        "prev": h.prev.hex() if h.prev else None,
        "hlc": [h.hlc.wall, h.hlc.counter],
        "kind": h.kind,
        "payload_hash": h.payload_hash.hex(),
        "payload_len": h.payload_len,
    }
    return {
        "name": name,
        "header": entry.raw.hex(),
        "payload": entry.payload.hex(),
        "id": hashlib.sha256(entry.raw).hexdigest(),
        "sig": h.sig.hex(),
        "fields": fields,
        "payload_value": to_json(payload),
    }


def build() -> str:
    key = SigningKey(SEED)
    prev: bytes | None = None
    out = []
    for seq, (name, kind, payload, (dwall, counter)) in enumerate(VECTORS, start=1):
        entry = seal(
            key,
            mesh=MESH,
            epoch=EPOCH,
            seq=seq,
            prev=prev,
            hlc=Hlc(WALL + dwall, counter),
            kind=kind,
            payload=encode(kind, payload),
        )
        out.append(vector(name, entry, payload))
        prev = entry.id
    doc = {
        "about": "memlane entry golden vectors; regenerate with make_golden.py",
        "key_seed": SEED.hex(),
        "writer": key.public.hex(),
        "mesh": MESH.hex(),
        "epoch": EPOCH.hex(),
        "entries": out,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = build()
    if "--check" in argv:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print("entries.json is up to date" if same else "entries.json differs")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
