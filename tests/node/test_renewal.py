"""Certificates renewed online before they expire (docs/mesh.md §Certificates), and links to a
node no longer admitted closed: the authority's renewal policy in process (who is renewed,
with what), then real ``memlane serve`` processes — a member whose certificate ends within the
renewal window takes the renewed one from its grant and connects with it after a restart; a
member revoked while linked loses its link."""

from __future__ import annotations

import asyncio
import datetime
import json
from pathlib import Path

from node.members import certs
from node.members.authority import DEFAULT_CERT_LIFETIME_MS
from node.mesh.service import NODE_CERT_FILE, RENEW_BEFORE_MS
from node.node import Node, system_wall
from tests.node.helpers import FAR_FUTURE_MS
from tests.node.servekit import certified_mesh, connected, memlane, node_id_of, poll, serve, stop
from tests.node.synckit import make_mesh

HOUR_MS = 3_600_000


async def _key(data: Path) -> bytes:
    async with Node.open(data) as node:
        return node.key.public


def test_the_authority_renews_only_grants_about_to_end(tmp_path):
    async def scenario() -> None:
        dirs = await make_mesh(tmp_path, ["one", "soon", "later", "gone"], system_wall)
        keys = {n: await _key(dirs[n]) for n in ("soon", "later", "gone")}
        async with Node.open(dirs["one"]) as one:
            now = one.wall()
            await one.membership.admit_member(
                keys["soon"], workspaces=["team"], label="soon", cert_expires=now + HOUR_MS
            )
            await one.membership.admit_member(keys["gone"], cert_expires=now + HOUR_MS)
            await one.membership.revoke_member(keys["gone"].hex())
            renewed = await one.membership.renew_due(
                before_ms=RENEW_BEFORE_MS, lifetime_ms=DEFAULT_CERT_LIFETIME_MS
            )
            assert [m.key for m in renewed] == [keys["soon"]]  # not "later", revoked, or itself
            grant = renewed[0]
            assert (grant.workspaces, grant.label) == (("team",), "soon")  # kept
            assert now + DEFAULT_CERT_LIFETIME_MS <= grant.cert_expires
            assert grant.certificate is not None
            certificate = certs.load_pem(grant.certificate.encode())
            authority = one.membership.authority_key
            assert authority is not None
            issued = certs.issued_by(certs.der(certificate), authority, one.info.mesh, one.wall())
            assert issued == keys["soon"]
            ends = certificate.not_valid_after_utc.timestamp() * 1000
            assert ends == grant.cert_expires // 1000 * 1000  # X.509 counts seconds
            assert one.membership.member(keys["later"]).cert_expires == FAR_FUTURE_MS  # type: ignore[union-attr]
            again = await one.membership.renew_due(
                before_ms=RENEW_BEFORE_MS, lifetime_ms=DEFAULT_CERT_LIFETIME_MS
            )
            assert again == []

    asyncio.run(scenario())


def _cert_ends(data: Path) -> datetime.datetime:
    return certs.load_pem((data / NODE_CERT_FILE).read_bytes()).not_valid_after_utc


def test_a_member_takes_its_renewed_certificate_online(tmp_path):
    dirs = certified_mesh(tmp_path, ["one", "two"])
    one, two = dirs["one"], dirs["two"]
    two_key = asyncio.run(_key(two))

    async def short_grant() -> None:  # the member's certificate ends within the hour
        async with Node.open(one) as node:
            await node.membership.admit_member(two_key, cert_expires=node.wall() + HOUR_MS)
            (two / NODE_CERT_FILE).write_bytes(certs.pem(node.membership.node_certificate(two_key)))

    asyncio.run(short_grant())
    before = _cert_ends(two)
    ids = {n: asyncio.run(node_id_of(d)) for n, d in dirs.items()}
    first, shown = serve(one, "--sync-listen", "127.0.0.1:0")
    try:
        second, _ = serve(two, "--peer", shown["sync"])
        soon = datetime.timedelta(days=80)
        poll("the renewed certificate in node.crt", lambda: _cert_ends(two) > before + soon)
        code, err = stop(second)
        assert code == 0, err
        second, _ = serve(two, "--peer", shown["sync"])  # connects with the new certificate
        poll("the member connected again", lambda: connected(one, ids["two"]))
        code, err = stop(second)
        assert code == 0, err
    finally:
        stop(first)
    members = json.loads(memlane("mesh", "members", "--data", str(one), "--json").stdout)
    listed = next(m for m in members if m["node_id"] == ids["two"])
    assert listed["cert_expires"] > before.isoformat()


def test_a_member_revoked_while_linked_loses_its_link(tmp_path):
    dirs = certified_mesh(tmp_path, ["one", "two"])
    one, two = dirs["one"], dirs["two"]
    ids = {n: asyncio.run(node_id_of(d)) for n, d in dirs.items()}
    first, shown = serve(one, "--sync-listen", "127.0.0.1:0")
    try:
        second, _ = serve(two, "--peer", shown["sync"])
        poll("the member linked", lambda: connected(one, ids["two"]))
        memlane("mesh", "revoke", "--data", str(one), ids["two"])  # another process
        poll("the link closed", lambda: not connected(one, ids["two"]))
        poll("and not reopened", lambda: not connected(two, ids["one"]))
        stop(second)
    finally:
        stop(first)
