"""Pieces shared by the commands: the quiet flag and the progress line of long runs.

The library reports progress through callbacks; how it is shown (a rewritten line on a
terminal, a log line every ``interval`` seconds otherwise, nothing when quiet) is decided here.
"""

from __future__ import annotations

import functools
import logging
import math
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from thermonet.ranges import NON_NEGATIVE_INT

log = logging.getLogger("thermonet.run")

F = TypeVar("F", bound=Callable[..., Any])


def stoppable(kept: Callable[[dict[str, Any]], str]) -> Callable[[F], F]:
    """Make a command stop on SIGINT or SIGTERM at once, with one line and the exit status
    128 + the signal number (130, 143), as ``run`` does.

    Every file a command writes is written atomically, so stopping anywhere loses only the work
    in progress; the handlers of :func:`thermonet.interrupt.handling` keep the exception out of
    compiled code and h5py, where Python would swallow a KeyboardInterrupt (and the command
    ran on to exit 0). ``kept(params)``, given the command's parameters, says what is kept and
    how to go on.
    """
    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            from thermonet import interrupt

            ctx = click.get_current_context()
            with interrupt.handling() as stop:
                try:
                    with stop.immediate():
                        result = command(*args, **kwargs)
                except interrupt.RunInterrupted as err:
                    click.echo(f"Stopped: stopped by {interrupt.signal_name(err.signum)}; "
                               f"{kept(ctx.params)}", err=True)
                    ctx.exit(err.exit_code)
                if stop.signum is not None:      # raised where Python swallowed it
                    click.echo(f"Stopped: {interrupt.signal_name(stop.signum)} arrived as the "
                               f"command finished; {kept(ctx.params)}", err=True)
                    ctx.exit(128 + stop.signum)
            return result

        return wrapper  # type: ignore[return-value]

    return decorate


def in_range(rng: Any) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A Click callback that refuses a value outside ``rng`` (a
    :class:`thermonet.ranges.Range`, the one a configuration key of the same meaning
    uses) in one line, naming the option, the value and the range."""
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is None:
            return value
        option = max(param.opts, key=len)
        example = param.default if rng.test(param.default) else rng.lo
        return rng.check(option, value, f"e.g. {option} {example}")

    callback.range = rng  # type: ignore[attr-defined]  # for tests and docs: the bound
    return callback


#: ``--seed``: a configuration's ``run.seed`` overridden (``run`` and ``anneal``)
seed_override = click.option("--seed", type=int, callback=in_range(NON_NEGATIVE_INT),
                             default=None, help="Override run.seed.")


def is_quiet(ctx: click.Context, quiet: bool = False) -> bool:
    """``--quiet`` of the command (``quiet``) or ``thermonet -q``."""
    root = ctx.find_root()
    return quiet or bool(root.obj and root.obj.get("quiet"))


def quiet_terminal(ctx: click.Context, quiet: bool) -> bool:
    """:func:`is_quiet`, and when quiet the terminal log below errors silenced (the run
    directory's own log file keeps everything)."""
    quiet = is_quiet(ctx, quiet)
    if quiet:
        for handler in logging.getLogger().handlers:
            if getattr(handler, "_thermonet_cli", False):
                handler.setLevel(logging.ERROR)
    return quiet


def clock(seconds: float) -> str:
    """``HH:MM:SS`` of a duration (``--:--:--`` if unknown)."""
    if not math.isfinite(seconds):
        return "--:--:--"
    return time.strftime("%H:%M:%S", time.gmtime(max(seconds, 0.0)))


class RunProgress:
    """The progress of ``thermonet run``/``resume``, a callback of :meth:`thermonet.runner.Run.run`.

    On a terminal: a bar with the acceptance rates, E(T_min), the rate and the ETA, rewritten
    in place; otherwise a log line every ``interval`` seconds (and at the end); nothing when
    ``quiet``.
    """

    def __init__(self, quiet: bool = False, stream: Any = None, interval: float = 10.0,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval
        self.now = now
        self.origin: tuple[float, int] | None = None
        self.last = 0.0

    def __call__(self, report: Any) -> None:
        """Show ``report`` (a :class:`thermonet.runner.RunProgress` record)."""
        if self.quiet:
            return
        now = self.now()
        done, total = report.iteration, report.total
        # the rate is timed from the first report, so initialisation, compilation and the
        # warm-up (minutes before the first production iteration) do not enter it
        if self.origin is None:
            self.origin = (now, done)
        t_origin, done_origin = self.origin
        rate = (done - done_origin) / (now - t_origin) if now > t_origin else math.nan
        eta = (total - done) / rate if rate > 0 else math.inf
        # a run without swaps (one rung, or independent chains) has no swap rate to show
        swap = (f"swap {report.swap_acceptance:.2f}  "
                if math.isfinite(report.swap_acceptance) else "")
        msg = (f"iteration {done}/{total}  acc {report.acceptance:.2f}  "
               f"{swap}E(T_min) {report.energy:.4g}  "
               f"{f'{rate:.2f}' if math.isfinite(rate) else '--'} it/s  "
               f"ETA {clock(eta) if math.isfinite(eta) else '--'}")
        frozen = getattr(report, "frozen", ())
        if frozen:
            from thermonet.runner import FROZEN_WINDOW

            # loud: a rung that accepts nothing is not sampling (step size too large)
            unit = getattr(report, "unit", "slot")
            msg += (f"  FROZEN: {unit}{'s' if len(frozen) > 1 else ''} "
                    f"{', '.join(map(str, frozen))} accepted nothing in the last "
                    f"{FROZEN_WINDOW} iterations")
        if self.tty:
            width = 24
            filled = int(width * done / max(total, 1))
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {msg}\x1b[K")
            self.stream.flush()
            if done >= total:
                self.stream.write("\n")
        elif now - self.last >= self.interval or done >= total:
            self.last = now
            log.info(msg)


class ProgressLine:
    """Progress on stderr: a rewritten line on a terminal, a line every ``interval`` seconds
    otherwise, nothing when quiet."""

    def __init__(self, quiet: bool, interval: float = 10.0, stream: Any = None) -> None:
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval
        self.t0 = time.monotonic()
        self.last = self.t0
        self.shown = False

    def show(self, msg: str, final: bool = False) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if self.tty:
            if final or now - self.last >= 0.2:
                self.last = now
                self.stream.write(f"\r{msg}\x1b[K")
                self.stream.flush()
                self.shown = True
        elif final or now - self.last >= self.interval:
            self.last = now
            click.echo(msg, err=True)

    def close(self) -> None:
        if self.tty and self.shown and not self.quiet:
            self.stream.write("\n")
            self.stream.flush()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


__all__ = ["ProgressLine", "RunProgress", "clock", "in_range", "is_quiet", "quiet_terminal",
           "seed_override", "stoppable"]
