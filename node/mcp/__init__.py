"""The MCP surface (docs/mcp.md): the node's tools under their specified names, on the
official SDK.

- ``node.mcp.server``: ``build_server(node, token=…)`` — the MCP server over an open node,
  listing ``node.tools.catalog`` and answering each call through ``Node.call``;
- ``node.mcp.stdio``: ``serve_stdio(node, token)`` — one principal over stdin/stdout;
- ``node.mcp.http``: ``http_server(node, listener, tls=…)`` — streamable HTTP with bearer
  tokens on every request.

Where a server may listen is ``node.address``'s.  The SDK is loaded only by the commands that
serve.
"""

__all__: list[str] = []
