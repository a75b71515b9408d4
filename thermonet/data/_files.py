"""Crash-safe file writing: temporary file in the target directory, then an atomic rename."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import h5py

from thermonet.errors import DataError
from thermonet.io import atomic


def new_temp_file(directory: pathlib.Path, prefix: str, suffix: str = ".tmp") -> pathlib.Path:
    """A new empty, uniquely named file in ``directory``
    (:func:`thermonet.io.atomic.new_temp_file`)."""
    try:
        return atomic.new_temp_file(directory, prefix, suffix)
    except FileExistsError as err:  # pragma: no cover - 48 random bits
        raise DataError(str(err)) from None


def write_h5_exclusive(path: pathlib.Path, fill: Callable[[h5py.File], None]) -> bool:
    """Write an HDF5 file under ``path`` atomically; never replace an existing one.

    Returns False if ``path`` already existed (nothing is written), True otherwise.
    """
    try:
        return atomic.write_h5_exclusive(path, fill)
    except OSError as err:
        raise _write_error(path, err) from None


def write_h5_replace(path: pathlib.Path, fill: Callable[[h5py.File], None]) -> None:
    """Write an HDF5 file to a temporary name, then atomically replace ``path`` with it."""
    try:
        atomic.write_h5_replace(path, fill)
    except OSError as err:
        raise _write_error(path, err) from None


def _write_error(path: pathlib.Path, err: OSError) -> DataError:
    return DataError(f"cannot write {path}: {err.strerror or err}; choose a writable location "
                     f"(for stored data sets: set THERMONET_DATA_DIR)")
