"""Tests that need an optional extra's package (pyproject.toml: ``bench`` brings eventsourcing,
``semantic`` wordllama, ``langgraph`` LangGraph's store interface) say so with
``@pytest.mark.extra(NAME)``, or a fixture calls ``need(NAME)`` (a module that imports the
package, ``need(NAME, module=True)`` before it does).  Where the package is not installed
(``pip install -e '.[dev]'`` alone) such a test skips and says why; ``make test`` installs
every extra, and under ``CI=true`` a missing one fails the test instead, as a skip there would
hide that it was not installed."""

from __future__ import annotations

import importlib.util
import os

import pytest

__all__ = ["EXTRAS", "need"]

# extra: the package it brings (``langgraph.graph``: ``langgraph`` alone is a namespace that
# langgraph-checkpoint fills too, without the graphs)
EXTRAS = {"bench": "eventsourcing", "semantic": "wordllama", "langgraph": "langgraph.graph"}


def need(extra: str, *, module: bool = False) -> None:
    """Skip (or under CI fail) the running test unless ``extra``'s package is installed;
    ``module``: the whole module, called before it imports the package."""
    package = EXTRAS[extra]
    if _installed(package):
        return
    reason = f"needs {package}, of the {extra} extra: pip install -e '.[{extra}]' (make test does)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"under CI every extra is installed: {reason}")
    pytest.skip(reason, allow_module_level=module)


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except ModuleNotFoundError:  # a dotted name whose parent is not there
        return False
