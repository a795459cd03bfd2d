"""What ``memlane serve`` answers beside sync and MCP (docs/operations.md §Health and metrics).

``health`` (the health port: ``/healthz`` and ``/metrics`` over plain HTTP, with limits),
``metrics`` (the node's counts and its sync in the Prometheus text format).  Nothing is
imported here: ``memlane serve`` loads them when it starts the health port.
"""
