"""structlog, configured once: JSON lines when stderr is not a terminal, readable otherwise."""

from __future__ import annotations

import io
import logging
import sys
from typing import TextIO, cast

import structlog

__all__ = ["configure_logging", "get_logger"]

_configured = False


class _Stderr(io.TextIOBase):
    """``sys.stderr`` as it is when a line is written, not as it was when logging was
    configured: in a process of its own that is one stream all along, and a caller that runs
    the command line's ``main`` in-process with its streams swapped (the tests) gets the
    lines of each run in that run's stderr."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(level: str = "INFO") -> None:
    global _configured
    if _configured:
        return
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer()
        if sys.stderr.isatty()
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *(() if sys.stderr.isatty() else (structlog.processors.format_exc_info,)),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, _Stderr())),
        cache_logger_on_first_use=True,
    )
    _configured = True


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(name)
    return logger
