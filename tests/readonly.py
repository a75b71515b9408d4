"""A read-only file system below one directory, simulated in-process.

The tests run as root, where ``chmod -R a-w`` stops no write, and mounting a read-only file
system needs privileges CI does not have. So every way thermonet writes (``open`` for writing,
``os.open`` with a write flag, rename, unlink, mkdir, link, ``h5py.File`` in a writing mode) is
made to fail below ``root`` as a read-only mount fails: ``OSError(EROFS)``, also for removing a
file that does not exist (Linux checks the mount before looking the name up). ``os.access``
reports such a directory as not writable, as it does on a read-only mount, unless
``access_knows=False`` (a file system whose refusal shows only when writing).
"""

from __future__ import annotations

import builtins
import errno
import io
import os
from pathlib import Path
from typing import Any

import h5py

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def read_only(monkeypatch: Any, root: Path, *, access_knows: bool = True) -> None:
    """Make everything below ``root`` read-only for the rest of the test."""
    top = os.path.realpath(root)

    def below(path: Any) -> bool:
        if isinstance(path, int):
            return False
        real = os.path.realpath(os.fspath(path))
        return real == top or real.startswith(top + os.sep)

    def refuse(path: Any) -> OSError:
        return OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))

    real_open, real_os_open = builtins.open, os.open

    def fake_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if any(c in mode for c in "wax+") and below(file):
            raise refuse(file)
        return real_open(file, mode, *args, **kwargs)

    def fake_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & _WRITE_FLAGS and below(path):
            raise refuse(path)
        return real_os_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    for name in ("unlink", "remove", "rmdir", "mkdir", "chmod", "utime", "truncate"):
        real = getattr(os, name)

        def guarded(path: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            if below(path):
                raise refuse(path)
            return _real(path, *args, **kwargs)

        monkeypatch.setattr(os, name, guarded)
    for name in ("replace", "rename", "link", "symlink"):
        real = getattr(os, name)

        def guarded2(src: Any, dst: Any, *args: Any, _real: Any = real, _name: str = name,
                     **kwargs: Any) -> Any:
            if below(dst) or (below(src) and _name != "symlink"):
                raise refuse(dst)
            return _real(src, dst, *args, **kwargs)

        monkeypatch.setattr(os, name, guarded2)
    if access_knows:
        real_access = os.access

        def fake_access(path: Any, mode: int, *args: Any, **kwargs: Any) -> bool:
            if mode & os.W_OK and below(path):
                return False
            return real_access(path, mode, *args, **kwargs)

        monkeypatch.setattr(os, "access", fake_access)

    class ReadOnlyFile(h5py.File):
        def __init__(self, name: Any, mode: str = "r", *args: Any, **kwargs: Any) -> None:
            in_memory = kwargs.get("driver") == "core" and kwargs.get("backing_store") is False
            if mode != "r" and not in_memory and isinstance(name, (str, os.PathLike)) \
                    and below(name):
                raise refuse(name)
            super().__init__(name, mode, *args, **kwargs)

    monkeypatch.setattr(h5py, "File", ReadOnlyFile)
