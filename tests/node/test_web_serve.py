"""``memlane serve --web HOST:PORT`` (docs/web.md §Serving): the web view served by the node's
own process beside MCP, signed in with a token issued by ``memlane token create``; plain HTTP
off loopback refused as for MCP; TLS with MCP's certificate (the cookie then ``Secure``); and
the port's connections bounded as MCP's are, counted apart (``web_connections``,
``web_header_timeout``)."""

from __future__ import annotations

import http.client
import socket
import ssl
import subprocess
import time
from urllib.parse import urlencode, urlsplit

from node.web.app import HEADERS
from tests.node.clikit import MEMLANE
from tests.node.mcpkit import TIMEOUT, Site, make_site, self_signed
from tests.node.servekit import (
    count_closed,
    memlane,
    open_connections,
    refusal_counts,
    serve,
    server_closed,
    stop,
)

PARTIAL_HEAD = b"GET /timeline HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def _connection(url: str, trust: ssl.SSLContext | None = None) -> http.client.HTTPConnection:
    where = urlsplit(url)
    assert where.hostname is not None
    if trust is None:
        return http.client.HTTPConnection(where.hostname, where.port, timeout=TIMEOUT)
    return http.client.HTTPSConnection(where.hostname, where.port, timeout=TIMEOUT, context=trust)


def _ask(
    url: str, path: str, *, token: str = "", cookie: str = "", trust: ssl.SSLContext | None = None
) -> tuple[int, dict[str, str], str]:
    conn = _connection(url, trust)
    headers = {"cookie": cookie} if cookie else {}
    if token:
        headers["content-type"] = "application/x-www-form-urlencoded"
        conn.request("POST", path, body=urlencode({"token": token}), headers=headers)
    else:
        conn.request("GET", path, headers=headers)
    r = conn.getresponse()
    answer = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    conn.close()
    return answer


def _written(site: Site) -> None:
    memlane(
        "write",
        "--data",
        str(site.data),
        "--token",
        site.tokens["alice"],
        "--title",
        "served by the node",
        "--text",
        "the web view of one process",
    )


def test_the_node_serves_the_web_view_beside_mcp(tmp_path):
    site = make_site(tmp_path / "node")
    _written(site)
    proc, shown = serve(site.data, "--web", "127.0.0.1:0")
    try:
        assert shown["web"].startswith("http://127.0.0.1:")
        assert shown["mcp_http"] != shown["web"]
        status, headers, body = _ask(shown["web"], "/signin", token=site.tokens["bob"])
        assert (status, headers["location"]) == (303, "/timeline")
        cookie = headers["set-cookie"].split(";")[0]
        assert "secure" not in headers["set-cookie"].lower()  # plain HTTP on loopback
        status, headers, body = _ask(shown["web"], "/timeline", cookie=cookie)
        assert status == 200
        assert "served by the node" in body
        assert "bob in team" in body
        assert all(headers[k] == v for k, v in HEADERS.items())
        status, headers, body = _ask(shown["web"], "/timeline")
        assert (status, headers["location"], body) == (303, "/signin", "")
    finally:
        code, err = stop(proc)
    assert code == 0, err
    assert site.tokens["bob"] not in err  # nor in any log line


def test_plain_http_off_loopback_is_refused_for_the_web_view_too(tmp_path):
    site = make_site(tmp_path / "node")
    done = subprocess.run(
        [
            str(MEMLANE),
            "serve",
            "--data",
            str(site.data),
            "--mcp-http",
            "127.0.0.1:0",
            "--web",
            "0.0.0.0:0",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("memlane serve: refusing plain HTTP on 0.0.0.0, "), done.stderr


def test_over_tls_the_cookie_is_secure(tmp_path):
    site = make_site(tmp_path / "node")
    cert, key = self_signed(tmp_path)
    proc, shown = serve(
        site.data, "--web", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key)
    )
    try:
        assert shown["web"].startswith("https://127.0.0.1:")
        trust = ssl.create_default_context(cafile=str(cert))
        status, headers, _ = _ask(shown["web"], "/signin", token=site.tokens["bob"], trust=trust)
        assert status == 303
        assert "; secure" in headers["set-cookie"].lower()
        assert "httponly" in headers["set-cookie"].lower()
    finally:
        code, err = stop(proc)
    assert code == 0, err


def test_the_web_port_holds_its_own_bounded_connections(tmp_path):
    site = make_site(tmp_path / "node")
    (site.data / "config.toml").write_text('[serve]\nmax_connections = 3\nheader_timeout = "1s"\n')
    proc, shown = serve(site.data, "--web", "127.0.0.1:0", "--health-listen", "127.0.0.1:0")
    slow: list[socket.socket] = []
    try:
        address = shown["web"].removeprefix("http://").rstrip("/")
        slow = open_connections(address, 3)
        for conn in slow:
            conn.sendall(PARTIAL_HEAD)
        extra = open_connections(address, 1)[0]
        slow.append(extra)
        assert b"503 Service Unavailable" in _read(extra)
        assert server_closed(extra)
        assert _ask(shown["mcp_http"].removesuffix("/mcp"), "/mcp")[0] != 503  # MCP's count
        opened = time.monotonic()
        assert count_closed(slow, 4, within=3) == 4  # dropped by the header timeout
        assert time.monotonic() - opened >= 0.5
        assert _ask(shown["web"], "/signin")[0] == 200
        assert refusal_counts(
            shown["health"], "web_connections", "web_header_timeout", "mcp_connections"
        ) == [1, 3, 0]
    finally:
        for conn in slow:
            conn.close()
        code, err = stop(proc)
    assert code == 0, err


def _read(conn: socket.socket) -> bytes:
    conn.settimeout(1)
    try:
        return conn.recv(65536)
    except OSError:
        return b""
