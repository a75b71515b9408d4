"""JSON for NumPy values, and the time stamp every file header carries."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from pathlib import Path
from typing import Any

import numpy as np


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second (e.g. ``2026-11-24T23:35:21+00:00``)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def json_default(obj: Any) -> Any:
    """``default=`` hook of :func:`json.dumps` for NumPy arrays and scalars, dataclasses,
    tuples, sets and paths."""
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, (tuple, set)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")


def to_jsonable(value: Any) -> Any:
    """``value`` with NumPy values as Python ones and non-finite floats as the strings
    ``"inf"``, ``"-inf"`` and ``"nan"`` (strict JSON has no such numbers)."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(x) for k, x in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(x) for x in value]
    if isinstance(value, np.ndarray):
        return [to_jsonable(x) for x in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else str(f)
    if isinstance(value, Path):
        return str(value)
    return value
