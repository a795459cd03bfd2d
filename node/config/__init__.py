"""Node configuration: ``config.toml`` in the data directory, every key optional.

- ``max_clock_skew`` (``"5m"``): how far past its own wall clock a received entry may pull
  this node's clock;
- ``synchronous`` (``"FULL"``): SQLite durability; FULL makes every acknowledged write survive
  a crash;
- ``pending_limit`` (``10000``): entries that may wait for a gap or an authenticating entry;
- ``pending_per_source`` (``1000``): of those, the entries one source (a peer node, a bundle)
  may hold; it holds at most the same share of ``pending_bytes``;
- ``pending_bytes`` (``67108864``, 64 MiB): the bytes (headers and payloads) waiting in all;
- ``pending_expiry`` (``"7d"``): a waiting entry older than this by the node's wall clock at its
  arrival is dropped (it is sent again while its gap is open);
- ``zone`` (``"UTC"``): the node's IANA zone (``Area/Location`` or ``UTC``) for the date and
  wall-time forms of tool calls' windows; e_timeline reads a bare ``start_date``/``end_date``
  as midnight in it (docs/time-windows.md);
- ``retention`` (unset): how far back this node promises data, a duration like ``90d``; tools
  declare it as their ``retention`` fact, so a window wholly older is refused before dispatch;
- ``[tools.defaults] responseFormat`` (``"detailed"``): the episode tools' ``response_format``
  when a call sends none (``concise`` or ``detailed``);
- ``[profiles.NAME]``: e_timeline's ``agent_profile`` presets — ``page_size`` (1–100),
  ``order_by`` (one of e_timeline's orders) and ``lanes`` (a list of lane names); each applies
  when the call does not say;
- ``[mesh] listen`` (unset: no listener): ``"HOST:PORT"`` where ``memlane serve`` accepts sync
  connections from the mesh's nodes (port 0 takes a free one; an IPv6 host in brackets).  Off
  by default: a node that only dials its peers needs none.  Mutual TLS guards it, so any
  address may be given;
- ``[mesh] peers`` (``[]``): ``["HOST:PORT", …]``, the nodes ``memlane serve`` dials and keeps
  connected;
- ``[mesh] max_connections`` (``32``), ``max_connections_per_key`` (``4``): sync connections
  open at once, in all and per node key (counted from its certificate, before hello);
- ``[mesh] max_handshakes`` (``64``), ``max_handshakes_per_address`` (``8``),
  ``handshake_timeout`` (``"10s"``): sync connections in their TLS handshake at once, in all
  and from one remote address, counted from accept, and how long one may take;
- ``[serve] mcp_http`` (``"127.0.0.1:8765"``): where ``memlane serve`` answers MCP;
- ``[serve] health`` (``"127.0.0.1:8766"``): where it answers ``/healthz`` and ``/metrics``
  (``"off"``: nowhere);
- ``[serve] max_body_bytes`` (``1048576``), ``max_json_depth`` (``32``), ``max_json_values``
  (``100000``): the bounds on an MCP request body, checked before it is parsed as JSON;
- ``[serve] max_sessions`` (``10000``), ``max_sessions_per_token`` (``16``): the open MCP
  sessions of the initialize era, in all and per token;
- ``[serve] max_connections`` (``256``), ``header_timeout`` (``"10s"``): MCP HTTP connections
  open at once, and how long one may take to send a request's head (from its connect, or
  from the answer before);
- ``[discovery] enabled`` (``true``): while sync runs, advertise this node's sync listener
  with zeroconf and dial the nodes of the same mesh found the same way;
- ``[discovery] interfaces`` (``[]``: every interface): the addresses zeroconf uses, e.g.
  ``["127.0.0.1"]``;
- ``[discovery] max_peers`` (``16``): at most this many discovered nodes are dialled at once;
- ``[discovery] max_waiting`` (``64``): at most this many more wait for a place;
- ``[discovery] evict_after`` (``"10s"``): a dialled discovered node that has not linked for
  this long gives its place to a waiting one;
- ``[search] embedder`` (``"none"``): the semantic leg of ``e_timeline find`` — ``"none"``,
  ``"wordllama"`` (a 256-d model whose weights ship in the ``memlane[semantic]`` wheel, loaded
  with no network) or ``"endpoint"`` (an OpenAI-compatible ``/v1/embeddings`` server);
- ``[search] url`` and ``model`` (required for ``endpoint``): the server's base URL
  (``http://`` or ``https://``; ``/v1/embeddings`` is added) and the model it is asked for;
- ``[search] key_file`` (unset): an absolute path (``~`` expands) to a readable file whose
  content, stripped, is sent as ``Authorization: Bearer …``;
- ``[search] timeout`` (``"10s"``, at most ``"10m"``): the bound on one request to the endpoint;
- ``[search] batch`` (``32``, 1–256): at most this many texts per request;
- ``[search] fusion_weight`` (``0.25``, 0–1): the vector leg's weight in the reciprocal-rank
  fusion with BM25 (docs/search.md).

The file is ``config.toml`` in the data directory unless ``--config FILE`` (or
``MEMLANE_CONFIG``) names another.  Environment variables override the file and flags
override both: ``MEMLANE_MCP_HTTP``, ``MEMLANE_HEALTH``, ``MEMLANE_SYNC_LISTEN``,
``MEMLANE_PEERS`` (comma-separated) and ``MEMLANE_DISCOVERY`` (``on``/``off``).  Every problem
is reported at once (``InvalidConfig.problems``); ``memlane config check`` lists them.

``node_config.py`` holds ``NodeConfig`` and the top-level keys, ``serve.py``, ``mesh.py``,
``discovery.py``, ``search.py`` and ``tools.py`` a section's checks each, ``values.py`` what
their keys are read as.
"""

from node.config.mesh import MeshLimits
from node.config.node_config import CONFIG_FILE, ENVIRONMENT, NodeConfig
from node.config.serve import ServeLimits
from node.config.values import InvalidConfig, parse_duration_ms
from node.search.settings import EMBEDDERS, SearchConfig

__all__ = [
    "CONFIG_FILE",
    "EMBEDDERS",
    "ENVIRONMENT",
    "InvalidConfig",
    "MeshLimits",
    "NodeConfig",
    "SearchConfig",
    "ServeLimits",
    "parse_duration_ms",
]
