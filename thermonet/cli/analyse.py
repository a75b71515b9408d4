"""``thermonet analyse``: per-temperature analysis of a run directory (docs/analysis.md)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from thermonet.cli.options import in_range
from thermonet.ranges import COUNT, FRACTION


def _echo_swaps(a: Any) -> None:
    """The swap acceptance of every adjacent pair of an analysis ``a``."""
    click.echo("swap acceptance per adjacent pair:")
    for lo, hi, r, n in zip(a.pairs["t_low"], a.pairs["t_high"], a.pairs["swap_acceptance"],
                            a.pairs["swap_attempts"], strict=True):
        click.echo(f"  T {lo:.4g} - {hi:.4g}: {_num(100 * r, 5, '.1f')}%  ({n} attempts)")


def _num(v: float, width: int, fmt: str = ".4g") -> str:
    return f"{'nan' if not math.isfinite(v) else format(v, fmt):>{width}}"


def _pm(v: float, e: float, width: int, fmt: str = ".4g") -> str:
    if not math.isfinite(v):
        return f"{'nan':>{width}}"
    s = format(v, fmt) + ("" if not math.isfinite(e) else f"±{format(e, '.2g')}")
    return f"{s:>{width}}"


def _pct(v: float, e: float, width: int) -> str:
    if not math.isfinite(v):
        return f"{'nan':>{width}}"
    s = f"{100 * v:.1f}" + ("" if not math.isfinite(e) else f"±{100 * e:.1f}")
    return f"{s:>{width}}"


#: names inside the run directory that an output prefix must never produce
_RUN_FILES = ("checkpoint", "config", "thermonet", "trace")


@click.command(short_help="Per-temperature analysis of a run: energies, errors, ladder health.")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--out", "prefix", default=None, metavar="PREFIX",
              help="Write PREFIX.csv, PREFIX_pairs.csv and PREFIX.h5 [default: RUN_DIR/analysis].")
@click.option("--discard", type=float, callback=in_range(FRACTION), default=None,
              help="Fraction of iterations discarded as burn-in [default: the run's run.discard].")
@click.option("--baseline", "baseline_path", type=click.Path(), default=None,
              help="Reference from `thermonet baseline`: its --json output saved to a file, or "
                   "its --out .npy of minima (or a directory holding baseline.json/.npy).")
@click.option("--no-predictive", is_flag=True,
              help="Skip the Bayesian predictive (average of the samples' softmax outputs).")
@click.option("--no-test", is_flag=True,
              help="Skip the test set (no test energies or errors: only the trace and the "
                   "training error).")
@click.option("--workers", type=int, callback=in_range(COUNT), default=1, show_default=True,
              help="Threads over stored samples (in each rank under MPI; the result does not "
                   "depend on it).")
@click.option("--executor", type=click.Choice(["auto", "threads", "mpi"]), default="auto",
              show_default=True, help="Where the samples are evaluated (any choice gives the "
              "same result): auto is MPI under mpiexec or srun (blocks of samples per rank), "
              "else threads.")
@click.option("--mnist-dir", type=click.Path(file_okay=False), default=None,
              envvar="THERMONET_MNIST_DIR", help="Directory of the MNIST IDX files.")
def analyse(run_dir: str, prefix: str | None, discard: float | None,
            baseline_path: str | None, no_predictive: bool, no_test: bool, workers: int,
            executor: str, mnist_dir: str | None) -> None:
    """Analyse the run in RUN_DIR and write the tables next to it.

    Per temperature: acceptance, dt, mean training and test energy (total and per point) with
    autocorrelation-aware error bars, training and test errors, the Bayesian predictive test
    energy and error, Var(E)/T^2, the autocorrelation time and the number of stored samples.
    Per adjacent pair: swap acceptance and rejection, and their sum, the communication
    barrier. Mixing: restarts and round trips of replicas, acceptance with its error bar,
    split-R-hat and bulk/tail ESS of the training energy, and a one-line verdict (mixed or not,
    with the reasons; docs/analysis.md). Also the uninformed-classifier and baseline reference
    lines, the temperature of minimum test error and the paper's stopping rule. Warnings (too
    few samples, short series) go to stderr. The run's own files are only read.

    \b
    Example:
        thermonet analyse runs/quickstart
        thermonet analyse runs/fig3_M3_D500 --baseline baseline_D500.json --workers 2
        mpiexec -n 4 thermonet analyse runs/fig3_M3_D500

    Under MPI each rank evaluates a block of every temperature's samples; rank 0 alone
    writes and prints, and the tables are bitwise those of one process.
    """
    from thermonet import parallel
    from thermonet.analysis import analyse as run_analyse

    job = parallel.world(executor)
    parallel.require_same_backend(job)
    run = Path(run_dir)
    csv_path, pairs_path, h5_path = _output_paths(run, prefix)
    a = run_analyse(run, discard=discard, test=not no_test, baseline=baseline_path,
                    predictive=not no_predictive, workers=workers, mnist_dir=mnist_dir,
                    world=job)

    def write() -> None:
        a.to_csv(csv_path, pairs_path)
        a.to_hdf5(h5_path)

    job.on_root(write)     # under MPI rank 0 alone writes and prints
    if not job.is_root:
        return

    if a.meta.get("task") == "regression":
        _echo_regression(a, csv_path, pairs_path, h5_path)
    else:
        _echo_classification(a, csv_path, pairs_path, h5_path)


def _output_paths(run: Path, prefix: str | None) -> tuple[Path, Path, Path]:
    """PREFIX.csv, PREFIX_pairs.csv and PREFIX.h5, refused (one line) where they would
    overwrite the run's own files or lie in no directory, checked writable."""
    from thermonet.errors import ConfigError
    from thermonet.io.outputs import check_output

    out = Path(prefix) if prefix is not None else run / "analysis"
    if (out.parent.resolve() == run.resolve() and out.name in _RUN_FILES) or \
            out.parent.resolve() == (run / "trace").resolve():
        raise ConfigError(f"--out {out} would overwrite the run's own files; choose another "
                          "prefix, e.g. RUN_DIR/analysis")
    if not out.parent.is_dir():
        raise ConfigError(f"--out {out}: directory {out.parent} does not exist; create it or "
                          "choose another prefix")
    csv_path = out.with_name(out.name + ".csv")
    pairs_path = out.with_name(out.name + "_pairs.csv")
    h5_path = out.with_name(out.name + ".h5")
    for path in (csv_path, pairs_path, h5_path):     # before the analysis (minutes)
        check_output(path)
    return csv_path, pairs_path, h5_path


def _echo_run(m: dict[str, Any], cases: str) -> None:
    """The run's first two lines: what was sampled on what, and how much of it is used."""
    arch = m["architecture"].get("name") if isinstance(m["architecture"], dict) else None
    click.echo(f"run        {m['run_dir']}  ({arch} on {m['data']}; "
               f"{m['n_train']} training, {m['n_test']} {cases}")
    click.echo(f"iterations {m['iterations']}, used {m['iterations_used']} after discarding "
               f"{m['discarded_iterations']} ({m['discard']:g}); {m['n_samples']} stored "
               "samples per temperature")


def _echo_end(a: Any, csv_path: Path, pairs_path: Path, h5_path: Path) -> None:
    """The evidence, the verdict, the files written and the warnings (to stderr)."""
    m = a.meta
    if m.get("log_evidence"):
        click.echo(f"evidence   {m['log_evidence']['text']}")
    click.echo(f"verdict    {m['verdict']['text']}")
    click.echo(f"wrote      {csv_path}, {pairs_path}, {h5_path}")
    for w in a.warnings:
        click.echo(f"warning: {w}", err=True)


def _echo_classification(a: Any, csv_path: Path, pairs_path: Path, h5_path: Path) -> None:
    """The summary of a classification run: the per-temperature table, the ladder's health,
    the mixing, the reference lines and the verdict."""
    m, t = a.meta, a.table
    kind = "" if not m["test_kind"] else ", " + str(m["test_kind"])
    _echo_run(m, f"test images{kind})")
    click.echo("per point: energies / N; errors in %; ± one standard error")
    click.echo(f"{'T':>9} {'acc':>5} {'dt':>9} {'E_train/N':>17} {'E_test/N':>17} "
               f"{'err_train':>10} {'err_test':>10} {'pred E/N':>9} {'pred err':>8} "
               f"{'Var(E)/T^2':>17} {'tau':>6} {'n':>4}")
    for k in range(len(a.temperatures)):
        click.echo(
            f"{t['temperature'][k]:>9.4g} {_num(t['acceptance'][k], 5, '.2f')} "
            f"{_num(t['dt'][k], 9, '.3g')} "
            f"{_pm(t['train_energy_per_point'][k], t['train_energy_per_point_err'][k], 17)} "
            f"{_pm(t['test_energy_per_point'][k], t['test_energy_per_point_err'][k], 17)} "
            f"{_pct(t['train_error'][k], t['train_error_err'][k], 10)} "
            f"{_pct(t['test_error'][k], t['test_error_err'][k], 10)} "
            f"{_num(t['predictive_test_energy_per_point'][k], 9)} "
            f"{_num(100 * t['predictive_test_error'][k], 8, '.1f')} "
            f"{_pm(t['heat_capacity'][k], t['heat_capacity_err'][k], 17)} "
            f"{_num(t['tau_train_energy'][k], 6, '.3g')} {int(t['n_samples'][k]):>4}")
    if len(a.temperatures) > 1:
        _echo_ladder(a)
    _echo_mixing(a)
    _echo_references(a)
    _echo_end(a, csv_path, pairs_path, h5_path)


def _echo_ladder(a: Any) -> None:
    """Swaps, round trips, restarts, the replica flow and the communication barrier."""
    from thermonet.analysis.ideal_exchange import ideal_line
    from thermonet.analysis.local_exploration import LocalExploration, exploration_line
    from thermonet.analysis.replica_flow import ReplicaFlow, flow_line

    m = a.meta
    _echo_swaps(a)
    per = m["round_trips_per_replica"]
    click.echo(f"round trips T_min -> T_max -> T_min: {m['round_trips']} "
               f"(per replica: {', '.join(str(v) for v in per)})")
    click.echo(f"restarts T_max -> T_min: {m['restarts']} (per replica: "
               f"{', '.join(str(v) for v in m['restarts_per_replica'])})")
    if m.get("ideal_passages"):
        click.echo(ideal_line(m["restarts"], m["round_trips"], m["ideal_passages"]))
    if m.get("replica_flow"):
        click.echo(flow_line(ReplicaFlow.from_dict(m["replica_flow"]), a.temperatures))
    if m.get("local_exploration"):
        le = LocalExploration.from_dict(m["local_exploration"])
        click.echo(exploration_line(le, a.temperatures))
    click.echo(f"communication barrier Lambda = sum of swap rejection rates: "
               f"{_pm(m['barrier'], m['barrier_err'], 0)}")


def _echo_mixing(a: Any) -> None:
    """Per temperature: acceptance (marked when frozen or timid), R-hat and ESS."""
    from thermonet.analysis.mixing import ACCEPT_FROZEN, ACCEPT_TIMID

    t = a.table
    click.echo("mixing per temperature (training energy; R-hat of this run's two halves):")
    click.echo(f"{'T':>9} {'accept':>12} {'R-hat':>6} {'ESS bulk':>9} {'ESS tail':>9} "
               f"{'ESS/h':>9} {'rho1(E)':>12}")
    # analysis files written before this column existed lack it
    per_hour = t.get("ess_bulk_per_hour", [math.nan] * len(a.temperatures))
    rho1 = t.get("energy_rho1", [math.nan] * len(a.temperatures))
    rho1_err = t.get("energy_rho1_err", [math.nan] * len(a.temperatures))
    for k in range(len(a.temperatures)):
        acc, acc_err = t["acceptance"][k], t["acceptance_err"][k]
        mark = ""
        if math.isfinite(acc) and not math.isfinite(acc_err):
            mark = "  <- accepted none" if acc == 0 else "  <- accepted all"
        elif acc < ACCEPT_FROZEN:
            mark = "  <- frozen"
        elif acc > ACCEPT_TIMID:
            mark = "  <- too timid"
        click.echo(f"{t['temperature'][k]:>9.4g} {_pm(acc, acc_err, 12, '.3f')} "
                   f"{_num(t['rhat_train_energy'][k], 6, '.3f')} "
                   f"{_num(t['ess_bulk_train_energy'][k], 9, '.0f')} "
                   f"{_num(t['ess_tail_train_energy'][k], 9, '.0f')} "
                   f"{_num(per_hour[k], 9, '.0f')} "
                   f"{_pm(rho1[k], rho1_err[k], 12, '.2f')}{mark}")


def _echo_references(a: Any) -> None:
    """The uninformed classifier, the baseline, the best temperatures and the stopping rule."""
    m = a.meta
    r, b = a.references, a.best
    click.echo(f"uninformed classifier: E/N = ln {m['n_classes']} = "
               f"{r['uninformed_per_point']:.4f}, error {100 * r['uninformed_error']:.0f}%")
    if math.isfinite(r["baseline_test_energy_per_point"]):
        e_base = _pm(r["baseline_test_energy_per_point"],
                     r["baseline_test_energy_per_point_err"], 0)
        click.echo(f"standard optimisation: E_test/N = {e_base}"
                   f", error {_pct(r['baseline_test_error'], r['baseline_test_error_err'], 0)}% "
                   f"({r['baseline_n_kept']:.0f} minima)")
    if math.isfinite(b["min_test_error_temperature"]):
        click.echo(f"minimum test error {100 * b['min_test_error']:.2f}% at T = "
                   f"{b['min_test_error_temperature']:.4g}; minimum test energy "
                   f"{b['min_test_energy_per_point']:.4g} per point at T = "
                   f"{b['min_test_energy_temperature']:.4g}")
        stop = b["stopping_stopped_at"]
        click.echo(f"stopping rule (cool from T_max until the test error is > "
                   f"{m['stop_sigma']:g} sigma above its minimum at "
                   f"{m.get('stop_patience', 1)} temperatures in a row): "
                   f"T = {b['stopping_temperature']:.4g}, test "
                   f"error {100 * b['stopping_test_error']:.2f}%"
                   + (f" (rise detected at T = {stop:.4g})" if math.isfinite(stop)
                      else " (no rise down to T_min)"))


def _echo_regression(a: Any, csv_path: Path, pairs_path: Path, h5_path: Path) -> None:
    """The summary of a regression run: squared errors (summed over the outputs, averaged
    over the cases) instead of classification errors; no test energies (they need each
    sample's noise level)."""
    m, t = a.meta, a.table
    _echo_run(m, "test cases; regression)")
    click.echo("squared errors summed over the outputs, mean over cases; ± one standard error; "
               "pred: of the averaged outputs")
    click.echo(f"{'T':>9} {'acc':>5} {'dt':>9} {'E_train':>17} {'sqerr_train':>17} "
               f"{'sqerr_test':>17} {'pred sqerr':>10} {'tau':>6} {'n':>4}")
    for k in range(len(a.temperatures)):
        click.echo(
            f"{t['temperature'][k]:>9.4g} {_num(t['acceptance'][k], 5, '.2f')} "
            f"{_num(t['dt'][k], 9, '.3g')} "
            f"{_pm(t['train_energy'][k], t['train_energy_err'][k], 17)} "
            f"{_pm(t['train_error'][k], t['train_error_err'][k], 17)} "
            f"{_pm(t['test_error'][k], t['test_error_err'][k], 17)} "
            f"{_num(t['predictive_test_error'][k], 10, '.5g')} "
            f"{_num(t['tau_train_energy'][k], 6, '.3g')} {int(t['n_samples'][k]):>4}")
    if len(a.temperatures) > 1:
        _echo_swaps(a)
    hyper = m.get("hyperparameters") or {}
    if hyper:
        click.echo("hyperparameters, posterior mean width 1/sqrt(precision) ± se "
                   "(the noise: its standard deviation):")
        for k, row in enumerate(hyper["width"]):
            cells = ", ".join(f"{n} {_pm(v, e, 0)}" for n, v, e in
                              zip(hyper["names"], row, hyper["width_err"][k], strict=True))
            click.echo(f"  T = {a.temperatures[k]:.4g}: {cells}")
    click.echo(f"predicting the training mean: test squared error "
               f"{_num(a.references['uninformed_error'], 0, '.5g')}")
    b = a.best
    if math.isfinite(b["min_test_error_temperature"]):
        click.echo(f"minimum test squared error {b['min_test_error']:.5g} at T = "
                   f"{b['min_test_error_temperature']:.4g}")
    _echo_end(a, csv_path, pairs_path, h5_path)
