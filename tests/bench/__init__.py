"""Benchmarks (``make bench``, ``python -m tests.bench``); not part of ``make test``.

Each module here other than ``common`` exposes ``run(*, quick, workdir) -> Result``;
figures and the command that prints them are in docs/benchmarks.md.
"""
