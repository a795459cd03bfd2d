"""Deterministic simulation of a whole mesh (``tests/sim/sim.py``; docs/mesh.md)."""
