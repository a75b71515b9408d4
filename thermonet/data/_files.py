"""Crash-safe file writing: temporary file in the target directory, then an atomic rename."""

from __future__ import annotations

import os
import pathlib
import secrets
from collections.abc import Callable

import h5py

from thermonet.errors import DataError


def new_temp_file(directory: pathlib.Path, prefix: str, suffix: str = ".tmp") -> pathlib.Path:
    """Create an empty, uniquely named file in ``directory`` with the usual (umask) permissions.

    Unlike :func:`tempfile.mkstemp` (mode 0600), the file gets the permissions a normal file
    would, so it can be renamed into place as a shared data file.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        path = directory / f"{prefix}{secrets.token_hex(6)}{suffix}"
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue
        os.close(fd)
        return path
    raise DataError(f"cannot create a temporary file in {directory}")  # pragma: no cover


def write_h5_exclusive(path: pathlib.Path, fill: Callable[[h5py.File], None]) -> bool:
    """Write an HDF5 file under ``path`` atomically; never replace an existing one.

    The file is written to a temporary name in the same directory and then hard-linked to
    ``path`` (which fails if ``path`` appeared meanwhile). Returns False if ``path`` already
    existed (nothing is written), True otherwise.
    """
    try:
        tmp = new_temp_file(path.parent, f".{path.name}.")
    except OSError as err:
        raise _write_error(path, err) from None
    try:
        with h5py.File(tmp, "w") as f:
            fill(f)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # no hard links on this file system: best effort
            if path.exists():
                return False
            os.replace(tmp, path)
        return True
    except OSError as err:
        raise _write_error(path, err) from None
    finally:
        tmp.unlink(missing_ok=True)


def write_h5_replace(path: pathlib.Path, fill: Callable[[h5py.File], None]) -> None:
    """Write an HDF5 file to a temporary name, then atomically replace ``path`` with it."""
    try:
        tmp = new_temp_file(path.parent, f".{path.name}.")
    except OSError as err:
        raise _write_error(path, err) from None
    try:
        with h5py.File(tmp, "w") as f:
            fill(f)
        os.replace(tmp, path)
    except OSError as err:
        raise _write_error(path, err) from None
    finally:
        tmp.unlink(missing_ok=True)


def _write_error(path: pathlib.Path, err: OSError) -> DataError:
    return DataError(f"cannot write {path}: {err.strerror or err}; choose a writable location "
                     f"(for stored data sets: set THERMONET_DATA_DIR)")
