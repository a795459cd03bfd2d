"""``memlane log verify``: re-check every stored log from its bytes.

For each log: seqs run 1..head without a gap, each ``prev`` is the id of the entry before,
each stored id is SHA-256 of its header bytes, each header decodes canonically and matches its
row, each present payload matches ``payload_hash`` (an absent one was withheld or erased: the
erased are counted apart), and the log is authentic under the one rule
(docs/entries.md) — checked from the head backwards until a signature verifies, so a healthy
log costs one signature check plus hashing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from node.store import LogRow, Reader, StoredEntry
from protocol.entry import Entry
from protocol.errors import ProtocolError
from protocol.signing import verify_signature

__all__ = ["VerifyReport", "verify_log"]


@dataclass(slots=True)
class VerifyReport:
    logs: int = 0
    entries: int = 0
    payloads_absent: int = 0
    payloads_erased: int = 0  # of those absent: taken by an erase (docs/erasure.md)
    forked_logs: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


async def verify_log(reader: Reader) -> VerifyReport:
    report = VerifyReport()
    for log in await reader.select_logs():
        report.logs += 1
        report.forked_logs += log.forked_at is not None
        await _verify_one(reader, log, report)
    report.payloads_erased = await reader.count("erased")
    return report


async def _verify_one(reader: Reader, log: LogRow, report: VerifyReport) -> None:
    name = f"log {log.writer.hex()[:12]}/{log.epoch.hex()}"
    prev_id: bytes | None = None
    last = 0
    async for stored in reader.iter_entries(log.log_id):
        problem = _check_entry(stored, log, last, prev_id)
        if problem:
            report.problems.append(f"{name} seq {stored.seq}: {problem}")
            return
        report.entries += 1
        report.payloads_absent += stored.payload is None
        prev_id, last = hashlib.sha256(stored.raw).digest(), stored.seq
    # A log row at seq 0 holds nothing yet; its head id is the head of the epoch a restore
    # continued (its seq 1 will name it as ``prev``, docs/entries.md §The header).
    if last != log.head_seq or (last and prev_id != log.head_id):
        report.problems.append(f"{name}: head {log.head_seq} does not match the stored entries")
    elif last and (signed := await _newest_signed(reader, log)) != last:
        report.problems.append(f"{name}: entries after seq {signed} are not authentic")


def _check_entry(stored: StoredEntry, log: LogRow, last: int, prev_id: bytes | None) -> str | None:
    try:
        entry = Entry.decode(stored.raw, stored.payload)
    except ProtocolError as exc:
        return f"does not decode: {exc}"
    h = entry.header
    if stored.seq != last + 1:
        return f"gap after seq {last}"
    if (h.writer, h.epoch, h.seq) != (log.writer, log.epoch, stored.seq):
        return "header does not match its row"
    if h.seq > 1 and h.prev != prev_id:
        return "prev does not link to the entry before"
    return None


async def _newest_signed(reader: Reader, log: LogRow) -> int:
    """The seq of the newest entry whose own signature verifies (0 if none): it vouches for
    everything linked before it.  The store only ever appends up to such an entry."""
    upper = log.head_seq
    while upper > 0:
        chunk = await reader.select_entries(log.log_id, gt=max(upper - 256, 0), lte=upper)
        for stored in reversed(chunk):
            h = Entry.decode(stored.raw, None).header
            if verify_signature(h.writer, h.sig, h.signing_bytes()):
                return stored.seq
        upper -= 256
    return 0
