"""The package's logger, `logging.getLogger("tilelang")`, set up as upstream TileLang sets up its own: one handler
with upstream's format, written through tqdm when it is installed (so progress bars stay intact) and to stderr
otherwise, not propagated to the root logger, level INFO. `tilelang.set_log_level` is the first statement of many
production kernel files."""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("tilelang")


def set_log_level(level: int | str) -> None:
    """Set the level of TileLang's logger: a level name ("DEBUG", "info", ...; an unknown name is INFO, as
    upstream) or a number (logging.WARNING).
    Example: tilelang.set_log_level("WARNING")  # silence compile-progress messages"""
    if isinstance(level, str):
        level = getattr(logging, level.upper(), logging.INFO)
        if not isinstance(level, int):  # a name of the logging module that is not a level
            level = logging.INFO
    logger.setLevel(level)


class _TqdmHandler(logging.Handler):
    """Writes each record with tqdm.write when tqdm is importable (a running progress bar is redrawn below it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            try:
                from tqdm.auto import tqdm
            except ImportError:
                print(message, file=sys.stderr)
            else:
                tqdm.write(message, file=sys.stderr)
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)


def install_handler() -> None:
    """Give the logger its handler once (a re-import of the package adds no second one)."""
    if any(isinstance(h, _TqdmHandler) for h in logger.handlers):
        return
    handler = _TqdmHandler()
    handler.setFormatter(logging.Formatter(
        fmt="%(asctime)s  [TileLang:%(name)s:%(levelname)s] (%(filename)s:%(lineno)d): %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S"))
    logger.addHandler(handler)
    logger.propagate = False
    set_log_level("INFO")
