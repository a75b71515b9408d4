"""The run directory's log file: thermonet's log records, also written to ``DIR/thermonet.log``."""

from __future__ import annotations

import logging
from pathlib import Path

from thermonet.io import checkpoint as ckpt


class _RunLogHandler(logging.FileHandler):
    """The run directory's log file; a failed write (a full disk) is not worth a traceback on
    stderr: the error that matters is reported by the write that failed."""

    def handleError(self, record: logging.LogRecord) -> None:
        pass


def attach_log(run_dir: Path) -> None:
    """Send thermonet's log records to run_dir/thermonet.log as well."""
    root = logging.getLogger("thermonet")
    path = str((Path(run_dir) / ckpt.LOG).resolve())
    for handler in list(root.handlers):
        if isinstance(handler, logging.FileHandler):
            if handler.baseFilename == path:
                return
            root.removeHandler(handler)
            handler.close()
    handler = _RunLogHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root.addHandler(handler)
    if root.getEffectiveLevel() > logging.INFO:
        root.setLevel(logging.INFO)


def detach_log() -> None:
    """Stop sending thermonet's log records to a run directory's log file."""
    root = logging.getLogger("thermonet")
    for handler in list(root.handlers):
        if isinstance(handler, logging.FileHandler):
            root.removeHandler(handler)
            handler.close()


__all__ = ["attach_log", "detach_log"]
