"""The ``thermonet`` command line (Click).

Subcommands live in one module each and are imported only when used. Library errors
(:class:`~thermonet.errors.ThermonetError`) become a one-line message and exit code 1;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

import click

from thermonet import __version__
from thermonet.errors import ThermonetError

#: subcommand name -> "module:attr"
COMMANDS: dict[str, str] = {
    "evaluate": "thermonet.cli.evaluate:evaluate",
    "data": "thermonet.cli.data:data",
    "plugins": "thermonet.cli.plugins:plugins",
    "run": "thermonet.cli.run:run",
    "resume": "thermonet.cli.run:resume",
    "info": "thermonet.cli.run:info",
    "analyse": "thermonet.cli.analyse:analyse",
    "compare": "thermonet.cli.compare:compare",
    "export": "thermonet.cli.export:export",
    "predict": "thermonet.cli.predict:predict",
    "minimise": "thermonet.cli.minimise:minimise",
    "baseline": "thermonet.cli.baseline:baseline",
    "evidence": "thermonet.cli.evidence:evidence",
    "anneal": "thermonet.cli.anneal:anneal",
    "plot": "thermonet.cli.plot:plot",
    "calibrate": "thermonet.cli.calibrate:calibrate",
    "mackay": "thermonet.cli.mackay:mackay",
}

#: other spellings accepted for a command (not listed in ``--help``)
ALIASES: dict[str, str] = {"analyze": "analyse", "minimize": "minimise"}

#: words a newcomer may try -> the command that does it (suggested, not run)
MEANINGS: dict[str, str] = {
    "summary": "info", "summarise": "info", "summarize": "info", "status": "info",
    "show": "info", "sample": "run", "train": "run", "fit": "run", "start": "run",
    "continue": "resume", "optimise": "minimise", "optimize": "minimise", "test": "evaluate",
    "score": "evaluate", "fetch": "data", "download": "data", "list": "plugins",
    "calibration": "calibrate", "diagnose": "analyse", "diagnostics": "analyse",
}


def nearest_command(name: str, commands: list[str]) -> str | None:
    """The command a mistyped or unknown ``name`` most likely meant, or None."""
    import difflib

    word = name.lower()
    if word in MEANINGS and MEANINGS[word] in commands:
        return MEANINGS[word]
    close = difflib.get_close_matches(word, [*commands, *ALIASES], n=1, cutoff=0.6)
    return ALIASES.get(close[0], close[0]) if close else None


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *super().list_commands(ctx)})

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0]) if args else ""
        if (args and not ctx.resilient_parsing and not name.startswith("-")
                and self.get_command(ctx, name) is None):
            near = nearest_command(name, self.list_commands(ctx))
            hint = f" Did you mean `thermonet {near}`?" if near else ""
            ctx.fail(f"No such command {name!r}.{hint} The commands: "
                     f"{', '.join(self.list_commands(ctx))} (thermonet --help).")
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd_name = ALIASES.get(cmd_name, cmd_name)
        if cmd_name in COMMANDS:
            module, _, attr = COMMANDS[cmd_name].partition(":")
            try:
                return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]
            except (ImportError, AttributeError) as err:
                return _broken_command(cmd_name, err)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            try:
                return super().invoke(ctx)
            except (click.exceptions.Exit, click.exceptions.Abort):
                raise
            except BaseException as err:
                _end_rank(err)
                raise
        except ThermonetError as err:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            raise click.ClickException(str(err)) from None
        except OSError as err:
            # a file system that refuses a write (read-only directory or mount): the writes are
            # atomic, so nothing already saved was touched
            if (ctx.obj and ctx.obj.get("debug")) or not _refused_write(err):
                raise
            raise click.ClickException(
                f"cannot write {err.filename}: {err.strerror}; nothing already saved was "
                "changed: make the directory writable or choose another --out") from None
        except Exception as err:
            # a third-party plugin's bug: one line naming the plugin; thermonet's own bugs
            # keep their traceback
            from thermonet import registry

            blamed = registry.blame(err.__traceback__)
            if (ctx.obj and ctx.obj.get("debug")) or blamed is None:
                raise
            spec, where = blamed
            raise click.ClickException(
                f"{spec.describe()} raised {type(err).__name__}: {' '.join(str(err).split())} "
                f"(at {where}); expected "
                "the plugin to keep its contract (thermonet.api): this is a bug in the plugin, "
                "report it to its authors (thermonet --debug shows the traceback); what was "
                "checkpointed is kept") from None


def _refused_write(err: OSError) -> bool:
    """Whether ``err`` is a file system refusing a write (permissions, a read-only mount, a
    directory where a file was named), not a failure in the middle of one."""
    import errno

    return (isinstance(err, (PermissionError, IsADirectoryError, NotADirectoryError))
            or err.errno in (errno.EROFS, errno.EACCES, errno.EPERM))


def _end_rank(err: BaseException) -> None:
    """Under MPI: an error raised on every rank alike is reported once (by rank 0) and ends
    each rank normally; an error on one rank alone ends the whole job (``MPI_Abort``), because
    the other ranks would otherwise wait for that one forever."""
    import sys
    import traceback

    from thermonet import parallel

    world = parallel.active_world()
    if world.size == 1:
        return
    if parallel.is_collective(err):
        origin = getattr(err, "thermonet_origin", None)
        if not world.is_root:
            raise click.exceptions.Exit(1) from None
        if origin and not isinstance(err, ThermonetError):   # a bug on another rank
            click.echo(f"Error {origin}", err=True)
            raise click.exceptions.Exit(1) from None
        return
    what = (str(err) if isinstance(err, ThermonetError)
            else "".join(traceback.format_exception(err)).rstrip())
    click.echo(f"Error on MPI rank {world.rank} of {world.size}: {what}\nending every rank of "
               "the job (MPI_Abort); what was checkpointed is kept: continue with `thermonet "
               "resume DIR`", err=True)
    sys.stderr.flush()
    world.abort(1)


def _broken_command(name: str, err: Exception) -> click.Command:
    """A stand-in for a subcommand whose module failed to import (shown, not fatal)."""
    reason = f"{type(err).__name__}: {err}"

    @click.command(name=name, short_help=f"(unavailable: {reason})",
                   context_settings={"ignore_unknown_options": True,
                                     "allow_extra_args": True})
    def broken() -> None:
        raise click.ClickException(f"command {name!r} is unavailable: {reason}")

    return broken


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="thermonet")
@click.option("-v", "--verbose", count=True, help="More log output (repeatable).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors (no progress, no log lines).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def main(ctx: click.Context, verbose: int, quiet: bool, debug: bool) -> None:
    """thermonet: Bayesian neural networks at finite temperature.

    Sample prob(w|T,D) ∝ exp(-E(D|w)/T) prior(w) with replica-exchange HMC, compute evidences,
    and reproduce Baldock & Marzari (2019).
    """
    from thermonet.kernels import configure

    configure()    # before any kernel is imported: Numba reads its settings once
    level = logging.ERROR if quiet else max(logging.DEBUG, logging.INFO - 10 * verbose)
    root = logging.getLogger()
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.setLevel(level)
    for h in list(root.handlers):
        if getattr(h, "_thermonet_cli", False):
            root.removeHandler(h)
    handler._thermonet_cli = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(min(level, logging.INFO))
    ctx.ensure_object(dict)
    ctx.obj.update(debug=debug, quiet=quiet, verbose=verbose)
