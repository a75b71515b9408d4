"""An exclusive lock on a run directory, so that two processes never advance one run.

Two ``thermonet run``/``resume`` processes on one directory would interleave checkpoints and
trace segments of two continuations, and one would clean up the other's temporary files. The
lock is an ``flock`` on ``DIR/.thermonet.lock``, which holds the PID of its holder for the
refusal message. The kernel drops an ``flock`` when its process ends, however it ends, so a
lock file left behind by a killed process never blocks the next run; the file itself is left in
place, because removing it would let a third process lock a fresh file while a second still
holds the old one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

from thermonet.errors import ThermonetError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, no protection
    fcntl = None  # type: ignore[assignment]

#: the lock file inside a run directory
LOCK_NAME = ".thermonet.lock"


class RunLockedError(ThermonetError):
    """Another process holds the lock of a run directory."""


class UnwritableRunError(ThermonetError):
    """A run directory cannot be written (a read-only file system or directory), so the run in
    it cannot be advanced."""


class DirLock:
    """The lock of ``directory`` (not taken until :meth:`acquire`).

    Parameters
    ----------
    directory : path
        An existing directory.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self._fh: IO[str] | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fh is not None

    def acquire(self) -> DirLock:
        """Take the lock, or raise :class:`RunLockedError` naming the holder's PID."""
        if self._fh is not None or fcntl is None:
            return self
        # append mode: opening must not truncate the PID of a holder we are about to name
        try:
            fh = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release()
        except OSError as err:
            # a read-only file system (EROFS) or directory: nothing was written yet
            raise UnwritableRunError(
                f"cannot write {self.path} ({err.strerror or err}): {self.directory} is not "
                "writable; expected a writable run directory, because running or resuming "
                "writes its lock, checkpoint and trace; nothing in it was changed: make it "
                f"writable, or copy it (cp -r {self.directory} NEW_DIR) and resume the "
                "copy") from None
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            fh.close()
            raise RunLockedError(
                f"{self.directory} is in use by another thermonet process (PID {holder}, which "
                f"holds {self.path}); expected no other run or resume on it; wait for that "
                f"process to finish, or stop it (kill {holder}) and `thermonet resume "
                f"{self.directory}`") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        self._fh = fh
        return self

    def release(self) -> None:
        """Give the lock up (a no-op if not held)."""
        fh, self._fh = self._fh, None
        if fh is None:
            return
        try:
            fh.seek(0)
            fh.truncate()
        except OSError:  # pragma: no cover - e.g. the directory vanished; unlocking still works
            pass
        fh.close()  # closing the descriptor drops the flock

    def __enter__(self) -> DirLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


__all__ = ["LOCK_NAME", "DirLock", "RunLockedError", "UnwritableRunError"]
