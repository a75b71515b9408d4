"""``thermonet baseline``: the paper's standard-optimisation baseline (Sec. 3.4), with the
``[baseline]`` table of a ``--config`` file as the defaults of its options."""

from __future__ import annotations

import json
import math
from typing import Any

import click

from thermonet.cli.minimiser_options import (
    common_options,
    fmt,
    minimiser_settings,
    output_error,
)
from thermonet.cli.options import ProgressLine, clock, in_range, is_quiet
from thermonet.ranges import ANY_NUMBER, COUNT, NON_NEGATIVE_INT

#: keys of a [baseline] table in a config file -> option destinations of `thermonet baseline`
BASELINE_KEYS = {"arch": "arch_name", "data": "data_name", "minimiser": "minimiser_name",
                 "set": "sets", "test": "test_kind", "prior_scale": "prior_scale",
                 "draws": "n_draws", "keep": "n_keep", "threshold": "energy_threshold",
                 "workers": "workers", "executor": "executor", "seed": "seed"}


def _load_baseline_config(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """Eager --config: the file's [baseline] table becomes the defaults of the options, so
    command-line options still win."""
    if value is None:
        return
    import difflib

    from thermonet.config import read_toml
    from thermonet.errors import ConfigError

    try:
        doc = read_toml(value)
        table = doc.get("baseline")
        if not isinstance(table, dict):
            raise ConfigError(f"{value} has no [baseline] table; expected keys "
                              f"{', '.join(BASELINE_KEYS)}")
        defaults: dict[str, object] = {}
        for key, v in table.items():
            if key not in BASELINE_KEYS:
                close = difflib.get_close_matches(key, list(BASELINE_KEYS), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"unknown key {key!r} in [baseline] of {value}{hint} Valid "
                                  f"keys: {', '.join(BASELINE_KEYS)}")
            if key == "set" and isinstance(v, dict):
                v = [f"{k}={val}" for k, val in v.items()]
            defaults[BASELINE_KEYS[key]] = v
    except ConfigError as err:
        raise click.BadParameter(str(err), ctx=ctx, param=param) from None
    ctx.default_map = {**(ctx.default_map or {}), **defaults}


@click.command(short_help="The paper's standard-optimisation baseline (Sec. 3.4).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              is_eager=True, expose_value=False, callback=_load_baseline_config,
              help="A TOML file whose [baseline] table gives the options, those marked "
                   "required included (e.g. sample_runs/baseline_M3_D500.toml); options "
                   "given here override it.")
@common_options
@click.option("--draws", "n_draws", type=int, callback=in_range(COUNT), required=True,
              help="Number of standard initial draws, each minimised once.")
@click.option("--keep", "n_keep", type=int, callback=in_range(COUNT), default=None,
              help="Keep at most N minima: the first N with E < threshold if --threshold is "
                   "given, else the N lowest-energy ones.")
@click.option("--threshold", "energy_threshold", type=float, callback=in_range(ANY_NUMBER),
              default=None,
              help="'E(D|w) = 0' means E below this, in nats over the training set "
                   "[default: 1e-3].")
@click.option("--workers", type=int, callback=in_range(COUNT), default=1, show_default=True,
              help="Threads (in each rank under MPI; the result does not depend on it).")
@click.option("--executor", type=click.Choice(["auto", "threads", "mpi"]), default="auto",
              show_default=True, help="Where the minimisations run (any choice gives the same "
              "result): auto is MPI under mpiexec or srun (blocks of draws per rank), else "
              "threads.")
@click.option("--seed", type=int, callback=in_range(NON_NEGATIVE_INT), default=0, show_default=True,
              help="Root seed; draw i uses SeedSequence(seed).spawn(draws)[i].")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="Save the kept minima as a (n_kept, n_params) .npy array (checked to be "
                   "writable before any work).")
@click.pass_context
def baseline(ctx: click.Context, arch_name: str, data_name: str, minimiser_name: str,
             sets: tuple[str, ...], test_kind: str, prior_scale: float | None,
             mnist_dir: str | None, as_json: bool, n_draws: int, n_keep: int | None,
             energy_threshold: float | None, workers: int, executor: str, seed: int,
             out_path: str | None) -> None:
    """Standard optimisation: minimise from many standard initial draws and report the mean
    test energy per point and test error of the minima with E(D|w) = 0.

    Each draw w_i ~ U(-1/sqrt(k_i), 1/sqrt(k_i)) is minimised with the paper's Alg. 3 (RMin,
    here with max_steps=50000 and grad_tol=1e-5 unless --set says otherwise). By default the
    minima with E(D|w) < 1e-3 are kept (the float64 stand-in for the paper's float32 E = 0);
    --keep N keeps the N lowest instead (the paper's D5000 procedure: 4000 draws, best 100).

    \b
    Examples:
        thermonet baseline --arch M3 --data D50 --draws 100 --workers 2
        thermonet baseline --arch M3 --data D500 --draws 100 --keep 100 --threshold 1e-3
        thermonet baseline --arch M3 --data D5000 --draws 4000 --keep 100 --workers 2
            --minimiser fire --set step_size=0.0015 --set dt_max=0.015   (one line)
        mpiexec -n 8 thermonet baseline --config sample_runs/baseline_M3_D500.toml

    Under MPI each rank minimises a contiguous block of the draws; rank 0 alone prints and
    writes --out, and the result is bitwise the one-process result.
    """
    from thermonet import parallel
    from thermonet.baseline import standard_optimisation
    from thermonet.data import load_data
    from thermonet.io.atomic import write_npy
    from thermonet.io.outputs import check_output
    from thermonet.registry import get_architecture

    job = parallel.world(executor)
    parallel.require_same_backend(job)
    if out_path is not None:
        # numpy.save's naming, kept: "--out minima" writes minima.npy
        if not out_path.endswith(".npy"):
            out_path += ".npy"
        checked = out_path
        job.on_root(lambda: check_output(checked))   # before the minimisations (hours)
    arch = (get_architecture(arch_name) if prior_scale is None
            else get_architecture(arch_name, prior_scale=prior_scale))
    mini = _minimiser(minimiser_name, sets)
    split = load_data(data_name, test=test_kind, mnist_dir=mnist_dir)

    line = ProgressLine(is_quiet(ctx) or not job.is_root)
    share = f" (rank 0's block of {n_draws}, {job.size} ranks)" if job.size > 1 else ""

    def progress(done: int, total: int) -> None:
        el = line.elapsed()
        eta = el / done * (total - done) if done else math.inf
        line.show(f"baseline: {done}/{total} minimisations{share}  elapsed {clock(el)}  "
                  f"ETA {clock(eta)}", final=done == total)

    res = standard_optimisation(arch, split, n_draws=n_draws, n_keep=n_keep,
                                energy_threshold=energy_threshold, minimiser=mini, seed=seed,
                                workers=workers, progress=progress,
                                keep_params=out_path is not None, world=job)
    line.close()
    if out_path is not None:
        assert res.params is not None  # kept: keep_params=True
        params, target = res.params, out_path

        def save() -> None:
            try:
                write_npy(target, params)
            except OSError as err:
                raise output_error(err, target) from None

        job.on_root(save)
    if not job.is_root:
        return
    summary = res.summary()
    summary["seconds"] = line.elapsed()
    if out_path is not None:
        summary["out"] = str(out_path)
    if as_json:
        click.echo(json.dumps(summary, sort_keys=True))
        return
    _print(res, summary, arch.name, out_path)


def _print(res: Any, summary: dict[str, Any], arch_name: str, out_path: str | None) -> None:
    """The baseline's result as text."""
    import numpy as np

    if res.energy_threshold is None:
        rule = f"the {res.n_keep} lowest E(D|w)"
    else:
        rule = f"E(D|w) < {res.energy_threshold:g}" + (
            f", first {res.n_keep}" if res.n_keep else "")
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(summary["reasons"].items()))
    steps = res.n_steps
    click.echo(f"architecture   {arch_name}, minimiser {res.minimiser}")
    click.echo(f"data           {res.train_set} ({res.n_train}), test {res.test_set} "
               f"({res.n_test}, {res.test_kind})")
    click.echo(f"draws          {res.n_draws} (seed {res.seed}); stopped by {reasons}")
    click.echo(f"steps          median {int(np.median(steps))}, max {int(steps.max())}")
    click.echo(f"kept           {res.n_kept} ({rule})")
    if res.n_kept:
        click.echo(f"test energy    {fmt(res.test_energy_mean)} +- {fmt(res.test_energy_sem)}"
                   " per point (mean +- standard error)")
        click.echo(f"test error     {100 * res.test_error_mean:.2f}% +- "
                   f"{100 * res.test_error_sem:.2f}%")
    else:
        click.echo("test energy    n/a (no minimum kept: raise --draws or --set max_steps)")
    if out_path is not None:
        click.echo(f"saved          {out_path} ({res.n_kept} minima)")


def _minimiser(name: str, sets: tuple[str, ...]) -> Any:
    """The minimiser ``name`` with the baseline's RMin settings (for rmin) under ``--set``."""
    from thermonet import registry
    from thermonet.baseline import BASELINE_RMIN_SETTINGS

    settings = minimiser_settings(sets, name)
    if name == "rmin":
        settings = {**BASELINE_RMIN_SETTINGS, **settings}
    return registry.load("minimiser", name)(**settings)
