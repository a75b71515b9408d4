"""Moved to :mod:`thermonet.io.checkpoint` (``checkpoint.h5``) and :mod:`thermonet.io.trace`
(the ``trace/`` segments); the names stay importable from here."""

from __future__ import annotations

from thermonet.io.checkpoint import (
    CHECKPOINT,
    CHECKPOINT_FORMAT,
    CONFIG,
    FORMAT_VERSION,
    LOG,
    Checkpoint,
    read_checkpoint,
    write_checkpoint,
)
from thermonet.io.trace import (
    TRACE_DIR,
    TRACE_FORMAT,
    list_segments,
    read_trace,
    segment_name,
    trim,
    write_segment,
)

__all__ = ["CHECKPOINT", "CHECKPOINT_FORMAT", "CONFIG", "FORMAT_VERSION", "LOG", "TRACE_DIR",
           "TRACE_FORMAT", "Checkpoint", "list_segments", "read_checkpoint", "read_trace",
           "segment_name", "trim", "write_checkpoint", "write_segment"]
