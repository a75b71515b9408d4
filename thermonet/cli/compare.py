"""``thermonet compare``: R-hat and ESS across independent runs of one configuration."""

from __future__ import annotations

import json
import math

import click

from thermonet.cli.options import in_range
from thermonet.ranges import FRACTION


def _num(v: float, width: int, fmt: str) -> str:
    return f"{'nan' if not math.isfinite(v) else format(v, fmt):>{width}}"


@click.command(short_help="R-hat and ESS per temperature across independent runs.")
@click.argument("run_dirs", metavar="DIR1 DIR2 ...", nargs=-1, required=True,
                type=click.Path(file_okay=False))
@click.option("--discard", type=float, callback=in_range(FRACTION), default=None,
              help="Burn-in fraction for every run [default: each run's run.discard].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def compare(run_dirs: tuple[str, ...], discard: float | None, as_json: bool) -> None:
    """Compare independent runs of one configuration on one ladder (e.g. different seeds).

    Each run is one chain, or as many as it ran (run.chains of a one-rung run): R-hat and
    ESS are between chains, so 2 runs of 4 chains are 8. The log-evidence line (ladders from
    the prior to T = 1) compares one log Z per run. Per temperature: the rank-normalised
    split-R-hat and the bulk and tail effective sample sizes of the training energy at that
    slot (after each run's discard; chains cut to the shortest), and of the test energy and
    error when every run has an analysis.h5 from `thermonet analyse`, and of each recorded
    hyperparameter's width 1/sqrt(precision) (hmc-gibbs runs; an R-hat above 1.05 there is
    flagged). Then a one-line verdict: not mixed if the largest R-hat of the training energy
    exceeds 1.05, no replica restarted, or any run has a frozen rung (its own acceptance
    below 0.05 there, the rule of `info` and `analyse`); bulk ESS below 100 is flagged
    (docs/analysis.md). Runs of different configurations (other than run.seed,
    run.n_iterations, run.workers, run.executor, run.checkpoint_every) are refused, and so
    are different ladders, unless each run adapted its own (ladder.adapt_rounds > 0): then
    the runs are compared at the temperatures they all share (T_min, the prior rung and any
    anchors), and each run's own verdict rules apply on its own ladder.

    \b
    Example:
        thermonet compare runs/seed0 runs/seed1 runs/seed2
    """
    from thermonet.analysis.compare import compare_runs

    c = compare_runs(list(run_dirs), discard=discard)
    if as_json:
        click.echo(json.dumps(c, sort_keys=True, allow_nan=True))
        return
    obs = [name for name in ("train_energy", "test_energy", "test_error") if name in c]
    n_runs, n_chains = len(c["runs"]), int(c["n_chains"])
    if n_chains == n_runs:
        head = f"{n_runs} runs, {c['n_draws']} draws each of the training energy"
    else:
        head = (f"{n_runs} runs ({n_chains} chains), {c['n_draws']} draws per chain of the "
                "training energy")
    click.echo(head + "".join(f"; {c[n]['n_draws']} samples of {n}" for n in obs[1:]))
    if not c["common_ladder"]:
        click.echo(f"ladders   adapted per run: compared at the {len(c['temperatures'])} "
                   "temperatures all runs share")
    head = f"{'T':>9}" + "".join(f" {n + ' R-hat':>18} {'ESS bulk':>8} {'ESS tail':>8}"
                                 for n in obs)
    click.echo(head)
    for k, t in enumerate(c["temperatures"]):
        cells = "".join(f" {_num(c[n]['rhat'][k], 18, '.3f')} "
                        f"{_num(c[n]['ess_bulk'][k], 8, '.0f')} "
                        f"{_num(c[n]['ess_tail'][k], 8, '.0f')}" for n in obs)
        click.echo(f"{t:>9.4g}{cells}")
    hyper = c.get("hyperparameters") or []
    if hyper:
        click.echo("hyperparameter widths 1/sqrt(precision):")
        click.echo(f"{'T':>9}" + "".join(f" {n + ' R-hat':>24} {'ESS bulk':>8}" for n in hyper))
        for k, t in enumerate(c["temperatures"]):
            cells = "".join(f" {_num(c['width:' + n]['rhat'][k], 24, '.3f')} "
                            f"{_num(c['width:' + n]['ess_bulk'][k], 8, '.0f')}" for n in hyper)
            click.echo(f"{t:>9.4g}{cells}")
    if c.get("log_evidence"):
        click.echo(f"evidence   {c['log_evidence']['text']}")
    click.echo(f"verdict    {c['verdict']['text']}")
