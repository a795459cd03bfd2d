"""Regenerate messages.json, the golden vectors that pin the sync wire format (docs/protocol.md).

Run ``.venv/bin/python tests/protocol/golden/make_messages.py`` only when the format changes on
purpose; ``--check`` exits 1 if the checked-in file differs from what this script would write.
The tests never run this script: they compare the protocol against the checked-in file.  The
entries the vectors carry are those of entries.json.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from protocol.clock import Hlc
from protocol.entry import Entry
from protocol.frames import encode_frame
from protocol.frontier import Frontier, Tip
from protocol.messages import (
    Bye,
    Credit,
    Entries,
    Error,
    ErrorCode,
    ForkProof,
    FrontierDigest,
    Hello,
    Message,
    Push,
    encode_message,
)
from protocol.payloads import Answer, Payloads, Want
from protocol.signing import SigningKey, seal

HERE = Path(__file__).parent
OUT = HERE / "messages.json"
MESH = b"\x11" * 16
NODE_A = bytes(range(32))
NODE_B = bytes(range(32, 64))
ENTRIES = json.loads((HERE / "entries.json").read_text("utf-8"))


def golden_entries() -> list[Entry]:
    return [
        Entry.decode(bytes.fromhex(v["header"]), bytes.fromhex(v["payload"]))
        for v in ENTRIES["entries"]
    ]


def fork_of(entry: Entry) -> Entry:
    """Another entry at the same position, signed by the same key (a fork)."""
    h = entry.header
    return seal(
        SigningKey(bytes.fromhex(ENTRIES["key_seed"])),
        mesh=h.mesh,
        epoch=h.epoch,
        seq=h.seq,
        prev=h.prev,
        hlc=Hlc(h.hlc.wall, 1),
        kind=h.kind,
        payload=entry.payload or b"",
    )


def vectors() -> list[tuple[str, Message]]:
    entries = golden_entries()
    first, second = entries[0], entries[1]
    asked = sorted(e.id for e in entries[1:5])  # four sr entries of workspace "team"
    held = next(e for e in entries[1:5] if e.id == asked[1])
    frontier = Frontier.of(
        [
            Tip(second.header.writer, second.header.epoch, 2, second.id),
            Tip(b"\x44" * 32, b"\x55" * 8, 300, b"\x66" * 32),
        ]
    )
    return [
        ("hello with features", Hello(1, 0, MESH, NODE_A, ("bundles", "push"))),
        ("hello from a later major, no features", Hello(2, 3, MESH, NODE_B)),
        ("frontier digest", FrontierDigest(frontier.digest())),
        ("frontier of two logs", *frontier.parts()),
        ("frontier in parts: a part with more to follow", *frontier.parts(1)[:1]),
        ("empty frontier", *Frontier().parts()),
        (
            "entries: one with payload, one without",
            Entries(((first.raw, first.payload), (second.raw, None))),
        ),
        ("entries: the done marker", Entries(done=True)),
        ("entries: last batch", Entries.of([second], done=True)),
        ("push", Push.of([entries[2]])),
        ("credit", Credit(64, 1 << 20)),
        ("credit in bytes only", Credit(0, 300_000)),
        ("fork proof", ForkProof.of(first, fork_of(first))),
        (
            "error: version refusal",
            Error(ErrorCode.VERSION, "protocol 2 is not spoken here; this side speaks 1", (1,)),
        ),
        ("error: refused, non-ASCII text", Error(ErrorCode.REFUSED, "arrêt — shutting down")),
        ("bye", Bye()),
        (
            "entries: one with payload, one header-only with a workspace tag",
            Entries(((first.raw, first.payload), (second.raw, "team"))),
        ),
        ("push: header-only with a workspace tag", Push(((entries[2].raw, "team"),))),
        ("want", Want(tuple(asked))),
        (
            "payloads: a payload and each answer",
            Payloads(
                (
                    (asked[0], Answer.ABSENT),
                    (asked[1], held.payload or b""),
                    (asked[2], Answer.ERASED),
                    (asked[3], Answer.WITHHELD),
                )
            ),
        ),
        ("payloads: none answered", Payloads()),
    ]


def to_json(value: Any) -> Any:
    """JSON form of a message's fields; bytes become {"$bin": hex}."""
    if isinstance(value, bytes):
        return {"$bin": value.hex()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [to_json(v) for v in value]
    return value


def build() -> str:
    out = []
    for name, message in vectors():
        out.append(
            {
                "name": name,
                "type": type(message).__name__,
                "frame": encode_frame(encode_message(message)).hex(),
                "fields": to_json(message),
            }
        )
    doc = {
        "about": "memlane sync message golden vectors; regenerate with make_messages.py",
        "messages": out,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = build()
    if "--check" in argv:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print("messages.json is up to date" if same else "messages.json differs")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
