"""Crash-safe writing: a temporary file beside the target, fsync, atomic rename, directory fsync.

HDF5 files are not crash-safe while open for writing, and a text file half written by a killed
process is worse than none, so nothing thermonet writes is written in place. A kill at any
moment leaves either the old file or the new one, never a mixture. The temporary file is
``NAME.thermonet-tmp`` in the target's directory (:func:`temp_path`), so a rename never crosses
file systems, and its suffix is one no other program uses: clean-ups remove only files with it,
never a user's ``*.tmp``. Where a file may be written at all is :mod:`thermonet.io.outputs`'
question.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from thermonet.io.jsonable import json_default

#: suffix of the temporary file written before the rename: thermonet's own, so that cleaning up
#: after a crash can never remove a file somebody else wrote
TEMP_SUFFIX = ".thermonet-tmp"


def temp_path(path: Path) -> Path:
    """The temporary file :func:`write_atomic` writes before renaming it to ``path``."""
    return path.with_name(path.name + TEMP_SUFFIX)


def fsync_dir(path: Path) -> None:
    """Flush a directory entry (a rename) to disk; a no-op where the OS cannot."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def crash_point(where: str, path: Path) -> None:
    """Test hook: ``THERMONET_TEST_CRASH=<where>:<file name>:<n>`` kills the process (as
    ``kill -9`` would) the n-th time ``where`` is reached for that file name."""
    spec = os.environ.get("THERMONET_TEST_CRASH")
    if not spec:
        return
    w, name, n = spec.split(":")
    if w == where and (name == "*" or path.name.startswith(name)):
        count = int(os.environ.get("_THERMONET_CRASH_COUNT", "0")) + 1
        os.environ["_THERMONET_CRASH_COUNT"] = str(count)
        if count >= int(n):
            os._exit(137)


def discard(tmp: Path) -> None:
    """Remove the temporary file ``tmp`` after a failed write, if there is one.

    The clean-up never raises: on a read-only file system even removing a missing file fails
    (EROFS), and that second error would hide the first, which says what went wrong.
    """
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def write_atomic(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Replace ``path`` by what ``write(tmp)`` writes to a temporary file, atomically.

    ``write`` receives the temporary path and must create it. The parent directory is created
    if missing; the file is fsynced, renamed over ``path`` and the directory fsynced. If ``write``
    or the fsync raises, ``path`` is untouched and the temporary file is removed. A process
    killed meanwhile leaves the temporary file for the next run's clean-up.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        write(tmp)
        _fsync_file(tmp)
    except BaseException:
        # a partial file helps nobody and, on a full disk, holds the space needed to go on
        discard(tmp)
        raise
    crash_point("before-replace", path)
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return path


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Atomically replace ``path`` with ``data``."""
    def write(tmp: Path) -> None:
        tmp.write_bytes(data)

    return write_atomic(path, write)


def write_text(path: str | Path, text: str) -> Path:
    """Atomically replace ``path`` with ``text`` (UTF-8)."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | Path, obj: Any, *, indent: int | None = 1) -> Path:
    """Atomically replace ``path`` with ``obj`` as JSON (NumPy values converted, keys sorted,
    non-finite floats as JSON's ``NaN``/``Infinity`` extensions)."""
    text = json.dumps(obj, indent=indent, sort_keys=True, default=json_default, allow_nan=True)
    return write_text(path, text + "\n")


def write_npy(path: str | Path, array: Any) -> Path:
    """Atomically replace ``path`` with ``array`` in NumPy's ``.npy`` format (written to the
    name given, which :func:`numpy.save` would extend by ``.npy``)."""
    import numpy as np

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.save(fh, np.asarray(array))

    return write_atomic(path, write)


def write_h5(path: str | Path, fill: Callable[[Any], None]) -> Path:
    """Atomically replace the HDF5 file ``path`` with what ``fill(h5py.File)`` writes.

    The file is built in memory and written to disk in one plain write: HDF5 left in the middle
    of a failed write (a full disk, a file-size limit) reports the failure only partly, prints
    tracebacks as it frees its objects and may crash the process at exit, while a failed
    ``write(2)`` of a finished image is an ordinary OSError.
    """
    import h5py

    def write(tmp: Path) -> None:
        with h5py.File(tmp, "w", driver="core", backing_store=False) as fh:
            fill(fh)
            fh.flush()
            image = fh.id.get_file_image()
        with open(tmp, "wb") as out:
            out.write(image)

    return write_atomic(path, write)


def new_temp_file(directory: Path, prefix: str, suffix: str = TEMP_SUFFIX) -> Path:
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
    raise FileExistsError(f"cannot create a temporary file in {directory}")  # pragma: no cover


def write_h5_exclusive(path: Path, fill: Callable[[Any], None]) -> bool:
    """Write an HDF5 file under ``path`` atomically; never replace an existing one.

    The file is written to a uniquely named temporary file in the same directory (several
    processes may race to create the same shared file) and then hard-linked to ``path``, which
    fails if ``path`` appeared meanwhile. Returns False if ``path`` already existed (nothing is
    written), True otherwise. Raises OSError if the directory is not writable.
    """
    import h5py

    tmp = new_temp_file(path.parent, f".{path.name}.")
    try:
        with h5py.File(tmp, "w") as fh:
            fill(fh)
        _fsync_file(tmp)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # no hard links on this file system: best effort
            if path.exists():
                return False
            os.replace(tmp, path)
        fsync_dir(path.parent)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def write_h5_replace(path: Path, fill: Callable[[Any], None]) -> None:
    """Like :func:`write_h5`, through a uniquely named temporary file (for shared files that
    several processes may write at once)."""
    import h5py

    tmp = new_temp_file(path.parent, f".{path.name}.")
    try:
        with h5py.File(tmp, "w") as fh:
            fill(fh)
        _fsync_file(tmp)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        tmp.unlink(missing_ok=True)
