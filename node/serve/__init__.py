"""What ``memlane serve`` runs beside sync (docs/operations.md §Health and metrics, §Limits).

``asgi`` (an ASGI app — MCP's, the web view's — in uvicorn inside the node's loop),
``connections`` (those ports' connections, bounded), ``health`` (the health port:
``/healthz`` and ``/metrics`` over plain HTTP, with limits), ``metrics`` (the node's counts
and its sync in the Prometheus text format).  Nothing is imported here: ``memlane serve``
loads them when it starts a port.
"""
