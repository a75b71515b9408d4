"""``thermonet anneal``: simulated annealing with early stopping on a validation set."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from thermonet.cli.options import is_quiet, seed_override, stoppable


def _kept(params: dict[str, Any]) -> str:
    """What a stopped ``anneal`` keeps, and how to go on."""
    from thermonet.annealing import ANNEAL_H5, read_anneal
    from thermonet.errors import ThermonetError

    config = params["config_path"]
    out = Path(params["out_dir"] or Path("runs") / Path(config).stem)
    try:
        done = int(read_anneal(out / ANNEAL_H5)["n_done"])
    except (ThermonetError, OSError, KeyError):
        done = 0
    if not done:
        return ("no temperature was completed, so nothing was saved; start it again with "
                f"`thermonet anneal {config} --out {out} --overwrite`")
    return (f"{out / ANNEAL_H5} holds {done} completed temperature(s); continue with "
            f"`thermonet anneal {config} --out {out} --resume`")


def _pct(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.2f}%"


def _sq(v: Any) -> str:
    """A regression set's squared error."""
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.5g}"


@click.command(short_help="Simulated annealing with validation early stopping (paper Sec. 5).")
@click.argument("config_path", metavar="CONFIG.toml", type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output directory [default: runs/<config name>].")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config value, e.g. --set anneal.patience=4 (repeatable).")
@seed_override
@click.option("--resume", is_flag=True,
              help="Continue the anneal in --out from its last completed temperature.")
@click.option("--overwrite", is_flag=True, help="Discard an anneal already in --out.")
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@click.pass_context
@stoppable(_kept)
def anneal(ctx: click.Context, config_path: str, out_dir: str | None, sets: tuple[str, ...],
           seed: int | None, resume: bool, overwrite: bool, quiet: bool,
           as_json: bool) -> None:
    """Anneal CONFIG.toml: cool with HMC until the average validation error starts to
    increase, then keep the parameters with the lowest validation error.

    Writes DIR/anneal.h5 (the per-temperature table, the best parameters as dataset `theta`,
    and the checkpoint, replaced atomically after every temperature) and DIR/anneal.json (the
    summary). Stop it at any time and continue with --resume: the result is bit-for-bit that
    of an uninterrupted anneal. The best parameters load anywhere a parameter file is
    accepted, e.g. `thermonet evaluate --arch M3 --data D500 --params DIR/anneal.h5`.

    \b
    Example:
        thermonet anneal sample_runs/anneal_M3_D500_quick.toml --out runs/anneal_quick
    """
    from thermonet import config as cfgmod
    from thermonet.annealing import ANNEAL_H5, Annealer, load_config
    from thermonet.errors import ConfigError
    from thermonet.io.outputs import refuse_owned

    if resume and overwrite:
        raise ConfigError("--resume and --overwrite exclude each other; --resume continues the "
                          "anneal in --out, --overwrite discards it")
    overrides = cfgmod.parse_set(list(sets), "anneal.t_end=0.01")
    commandline = {"run.seed": seed} if seed is not None else {}
    cfg = load_config(config_path, overrides, commandline)
    out = Path(out_dir) if out_dir else Path("runs") / Path(config_path).stem
    refuse_owned(out)     # never inside another run's kept files (its trace/)
    q = is_quiet(ctx, quiet)
    if resume:
        if not (out / ANNEAL_H5).is_file():
            raise ConfigError(f"--resume: {out} holds no anneal ({out / ANNEAL_H5} is missing); "
                              "start it without --resume")
        ann = Annealer.open(out, cfg)
        if not q:
            click.echo(f"resuming {out} after {ann.n_done} temperature(s)", err=True)
    else:
        ann = Annealer.create(cfg, out, overwrite=overwrite)
        if not q:
            v = ann.s.validation
            click.echo(f"anneal in {out}: {ann.s.arch.name} on {ann.s.split.train.name}, "
                       f"validation {len(v)} cases ({v.provenance['pool']} pool), test "
                       f"{ann.s.test.name} ({len(ann.s.test)}), {len(ann.s.schedule)} "
                       f"temperatures", err=True)
    n_total = len(ann.s.schedule)
    t0 = time.monotonic()
    err = _sq if ann.s.validation.task == "regression" else _pct

    def progress(a: Annealer) -> None:
        if q:
            return
        t = a.table
        k = a.n_done - 1
        best = a.best
        click.echo(f"T {k + 1}/{n_total} = {t['temperature'][k]:.4g}  acc "
                   f"{t['acceptance'][k]:.2f}  dt {t['step_size'][k]:.3g}  <E> "
                   f"{t['energy_mean'][k]:.5g}  val err {err(t['val_error_mean'][k])} "
                   f"(run. avg {err(t['running_average'][k])}; best vector "
                   f"{err(best.get('val_error'))} at T = {best.get('temperature', math.nan):.4g})"
                   f"  {t['seconds'][k]:.1f} s  elapsed {time.monotonic() - t0:.0f} s",
                   err=True)

    ann.run(progress=progress)
    summary = ann.summary()
    if as_json:
        click.echo(json.dumps(summary, sort_keys=True))
        return
    _print(summary, n_total, err, out)


def _print(summary: dict[str, Any], n_total: int, err: Callable[[Any], str], out: Path) -> None:
    """The anneal's summary as text."""
    from thermonet.annealing import ANNEAL_H5

    b = summary["best"]
    click.echo(f"stopped        {summary['stop_reason']} ({summary['n_temperatures_done']} of "
               f"{n_total} temperatures, {summary['elapsed_s']:.1f} s wall, "
               f"{summary['cpu_s']:.1f} s CPU)")
    click.echo(f"best vector    T = {b['temperature']:.6g} (temperature "
               f"{b['temperature_index'] + 1}, trajectory {b['trajectory'] + 1})")
    click.echo(f"validation     error {err(b['val_error'])}, energy "
               f"{b['val_energy_per_point']:.6g} per point ({summary['validation']['set']}, "
               f"{summary['validation']['n']})")
    click.echo(f"train          error {err(b['train_error'])}, energy "
               f"{b['train_energy']:.6g}")
    ts = b["test"]
    click.echo(f"test           error {err(ts['error'])}, energy {ts['energy_per_point']:.6g} "
               f"per point ({ts['set']}, {ts['n']})")
    click.echo(f"saved          {out / ANNEAL_H5} (best parameters: dataset theta), "
               f"{out / 'anneal.json'}")
