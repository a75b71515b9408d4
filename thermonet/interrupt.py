"""Stopping a run cleanly on Ctrl-C (SIGINT) or SIGTERM.

Python turns SIGINT into a :class:`KeyboardInterrupt` raised wherever the main thread happens to
be, and inside an HDF5 write that exception may be swallowed ("Exception ignored in ...") so
that the run carries on; SIGTERM simply ends the process. Instead, while :func:`handling` is in
effect, either signal only records a request to stop, and the runner stops at its next safe
point: after the current iteration and its trace and checkpoint writes. Where no state would be
lost by stopping at once (the initialisation, before the first checkpoint), :meth:`StopSignals.
immediate` makes the handler raise :class:`RunInterrupted` straight away, and the request stays
recorded in case the exception is swallowed.

A stopped command exits with status 128 + the signal number (130 for SIGINT, 143 for SIGTERM),
as a shell reports a process ended by that signal.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from thermonet.errors import ThermonetError

#: the signals that ask a run to stop
SIGNALS = (signal.SIGINT, signal.SIGTERM)


#: seconds after which a signal that arrived inside the compiler is sent again
RESEND_AFTER = 0.05

#: packages in whose Python frames an exception must not be raised: the JIT compiler, HDF5's
#: bindings (an exception inside their callbacks is swallowed or leaves state behind), and
#: ctypes, which compiled code calls back into: passing a NumPy Generator to a kernel runs
#: ``ctypes.cast`` from Numba's C unboxing code, and an exception raised there crashed the
#: process with a segmentation fault (9 of 80 runs stopped during their burn-in; 0 of 80 since)
_UNSAFE_DIRS = tuple(f"{os.sep}{name}{os.sep}"
                     for name in ("numba", "llvmlite", "h5py", "ctypes"))
#: nor while a module is being imported (a half-initialised extension module can crash later)
_UNSAFE_PREFIX = "<frozen importlib"


def in_unsafe_code(frame: FrameType | None) -> bool:
    """Whether ``frame`` or any frame below it runs Numba's, llvmlite's, h5py's or ctypes'
    Python code (a kernel being compiled, or a compiled kernel's call back into ctypes) or an
    import."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_UNSAFE_PREFIX) or any(d in name for d in _UNSAFE_DIRS):
            return True
        frame = frame.f_back
    return False


def unsafe_in_any_thread(frame: FrameType | None) -> bool:
    """:func:`in_unsafe_code` of ``frame`` or of any other thread's current frame (a thread
    compiling while the main thread would raise and end the process under it)."""
    if in_unsafe_code(frame):
        return True
    return any(in_unsafe_code(f) for t, f in sys._current_frames().items()
               if t != threading.get_ident())


class RunInterrupted(ThermonetError):
    """A run stopped because of a signal; :attr:`exit_code` is the status to exit with."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """128 + the signal number, the shell's convention for a process ended by a signal."""
        return 128 + self.signum


def signal_name(signum: int) -> str:
    """``SIGINT``, ``SIGTERM``, ... for a signal number."""
    try:
        return signal.Signals(signum).name
    except ValueError:  # pragma: no cover - every signal we handle has a name
        return f"signal {signum}"


class StopSignals:
    """The stop request recorded by the signal handlers of :func:`handling`."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._immediate = 0

    @property
    def requested(self) -> bool:
        """Whether SIGINT or SIGTERM arrived."""
        return self.signum is not None

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler: record the (first) signal; raise if stopping at once is safe.

        Not while any thread is inside Numba's compiler (a kernel's first call), h5py, ctypes or
        an import (:func:`unsafe_in_any_thread`): an exception raised in one of LLVM's callbacks
        there is swallowed ("Exception ignored on calling ctypes callback") and can leave the
        process to crash at exit; the signal is sent again :data:`RESEND_AFTER` seconds later,
        until it arrives outside."""
        if self.signum is None:
            self.signum = signum
        if self._immediate:
            if unsafe_in_any_thread(frame):
                timer = threading.Timer(RESEND_AFTER, os.kill, args=(os.getpid(), signum))
                timer.daemon = True
                timer.start()
                return
            raise RunInterrupted(signum, f"interrupted by {signal_name(signum)}")

    @contextmanager
    def immediate(self) -> Iterator[StopSignals]:
        """Within this block a signal raises :class:`RunInterrupted` at once (also on entry,
        if one already arrived)."""
        if self.signum is not None:
            raise RunInterrupted(self.signum, f"interrupted by {signal_name(self.signum)}")
        self._immediate += 1
        try:
            yield self
        finally:
            self._immediate -= 1

    def raise_if_requested(self, message: str) -> None:
        """Raise :class:`RunInterrupted` with ``message`` if a signal arrived."""
        if self.signum is not None:
            raise RunInterrupted(self.signum, message)


_active: StopSignals | None = None


@contextmanager
def handling() -> Iterator[StopSignals]:
    """Record SIGINT and SIGTERM instead of acting on them, for the duration of the block.

    Re-entrant: an inner block shares the outer one's :class:`StopSignals`, so a request made
    at any time during a command reaches the runner. Handlers can be installed only in the main
    thread; elsewhere the block yields a :class:`StopSignals` that never sees a signal.
    """
    global _active
    if _active is not None:
        yield _active
        return
    stop = StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous: dict[int, Any] = {sig: signal.signal(sig, stop.handle) for sig in SIGNALS}
    previous_hook = sys.unraisablehook

    def unraisable(report: Any) -> None:
        # the handler raised where Python cannot propagate (a __del__, a finaliser, a
        # callback), and Python would print "Exception ignored ... RunInterrupted" with a
        # traceback; the request is recorded, and the command stops on it at its next check
        if isinstance(report.exc_value, RunInterrupted) and stop.requested:
            return
        previous_hook(report)

    sys.unraisablehook = unraisable
    _active = stop
    try:
        yield stop
    finally:
        _active = None
        sys.unraisablehook = previous_hook
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = ["RESEND_AFTER", "SIGNALS", "RunInterrupted", "StopSignals", "handling",
           "in_unsafe_code", "signal_name", "unsafe_in_any_thread"]
