"""The ``memlane`` command line (docs/cli.md)."""

from node.cli.main import main

__all__ = ["main"]
