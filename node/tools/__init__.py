"""The tool layer: argument checks, refusal texts and results — the only thing the CLI, MCP
and the Python API call."""
