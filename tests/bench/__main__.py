"""``python -m tests.bench [--quick] [--dir DIR] [--locomo DIR] [NAME ...]``: run the
benchmark modules.

Every module of this package with a ``run`` function is a benchmark (``ingest``, ``timeline``,
``quality``, …); NAMEs select those whose name contains one of them.  ``--quick`` is a small
smoke run whose figures mean nothing.  Each prints one table on stdout; progress goes to
stderr.  A benchmark whose result has a non-zero ``exit_status`` (its data is missing, say)
makes the run exit with it, after the others ran.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import tests.bench
from tests.bench.common import Result, render

__all__ = ["benchmarks", "main"]

_NOT_BENCHMARKS = frozenset({"common"})

Benchmark = Callable[..., object]  # a Result, or an object that renders itself


def benchmarks() -> dict[str, Benchmark]:
    """Every benchmark module's ``run``, by module name."""
    found: dict[str, Benchmark] = {}
    for info in pkgutil.iter_modules(tests.bench.__path__):
        name = info.name
        if name.startswith(("_", "test_")) or name in _NOT_BENCHMARKS:
            continue
        module = importlib.import_module(f"tests.bench.{name}")
        if callable(getattr(module, "run", None)):
            found[name] = module.run
    return found


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help="run only these benchmarks")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="where to put the databases (default: a temporary directory; "
        "put it on the disk you mean to measure)",
    )
    parser.add_argument(
        "--locomo",
        type=Path,
        default=None,
        help="the LoCoMo conversations for quality (default: $MEMLANE_LOCOMO, else "
        "shared/data/locomo-dev beside the repository)",
    )
    return parser


def _extras(run: Benchmark, args: argparse.Namespace) -> dict[str, object]:
    """The optional flags ``run`` takes by keyword (so benchmarks that take none keep their
    ``run(*, quick, workdir)``)."""
    taken = inspect.signature(run).parameters
    return {name: getattr(args, name) for name in ("locomo",) if name in taken}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    everything = benchmarks()
    chosen = {
        n: fn
        for n, fn in everything.items()
        if not args.names or any(want in n for want in args.names)
    }
    if not chosen:
        print(
            f"no benchmark matches {' '.join(args.names)}; there are: "
            f"{', '.join(sorted(everything))}",
            file=sys.stderr,
        )
        return 2
    status = 0
    for name, run in chosen.items():
        if args.dir is not None:
            args.dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"memlane-bench-{name}-", dir=args.dir) as tmp:
            result = run(quick=args.quick, workdir=Path(tmp), **_extras(run, args))
        # A benchmark whose table does not fit ``Result`` returns an object that renders
        # itself (``str``).
        text = render(result) if isinstance(result, Result) else str(result)
        print(text, flush=True)
        print(flush=True)
        status = status or int(getattr(result, "exit_status", 0))
    return status


if __name__ == "__main__":
    sys.exit(main())
