"""Moved to :mod:`thermonet.parallel` (executors are infrastructure, not a plugin contract)."""

from __future__ import annotations

from thermonet.parallel import Executor, SerialExecutor, ThreadExecutor, make_executor

__all__ = ["Executor", "SerialExecutor", "ThreadExecutor", "make_executor"]
