"""``thermonet run``, ``thermonet resume`` and ``thermonet info``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from thermonet.cli.options import RunProgress, in_range, quiet_terminal, seed_override
from thermonet.ranges import COUNT


@click.command(short_help="Run a configuration (minimise, sample, replica exchange).")
@click.argument("config_path", metavar="CONFIG.toml", type=click.Path(dir_okay=False))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config value, e.g. --set ladder.t_max=10 (repeatable).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Run directory [default: runs/<config name>].")
@seed_override
@click.option("--overwrite", is_flag=True,
              help="Discard a run already in --out (only thermonet's own files).")
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.pass_context
def run(ctx: click.Context, config_path: str, sets: tuple[str, ...], out_dir: str | None,
        seed: int | None, overwrite: bool, quiet: bool) -> None:
    """Run CONFIG.toml: build every component it names, initialise, sample and checkpoint.

    The run directory gets config.toml (the resolved configuration: every default explicit,
    with where each value came from), checkpoint.h5, the trace/ and thermonet.log. Stop it at
    any time (Ctrl-C or SIGTERM: at the next safe point, exit status 130 or 143) and continue
    with `thermonet resume DIR`. One process at a time may run or resume DIR (a lock).

    \b
    Example:
        thermonet run sample_runs/quickstart.toml --out runs/quick --set run.n_iterations=50
    """
    import warnings

    from thermonet import config as cfgmod
    from thermonet import parallel
    from thermonet.runner import Run

    overrides = cfgmod.parse_set(list(sets), "ladder.t_max=10")
    commandline = {"run.seed": seed} if seed is not None else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecationWarning)
        cfg = cfgmod.load(config_path, overrides, commandline)
    root = parallel.world(cfg["run"]["executor"]).is_root   # under MPI rank 0 speaks
    # a configuration in a deprecated form: say how to write it now
    for warning in caught if root else ():
        click.echo(f"Warning: {warning.message}", err=True)
    out = Path(out_dir) if out_dir else Path("runs") / Path(config_path).stem
    quiet = quiet_terminal(ctx, quiet or not root)
    what = cfgmod.plan(cfg)
    if what and not quiet:
        click.echo(what, err=True)
    if not quiet and not cfg["data"]["path"]:
        from thermonet.data import official_fallback_note

        note = official_fallback_note(cfg["data"]["name"], cfg["data"]["test"])
        if note:
            click.echo(note, err=True)
    _advance(ctx, lambda: Run.create(cfg, out, overwrite=overwrite), quiet,
             f"run directory: {out}")
    if not quiet:
        click.echo(f"done: {cfg['run']['n_iterations']} iterations in {out}  (summary: "
                   f"thermonet info {out})", err=True)


def _advance(ctx: click.Context, open_run: Any, quiet: bool, banner: str) -> None:
    """Open (or create) a run and advance it; SIGINT and SIGTERM stop it at its next safe point
    with one line and the exit status 128 + signal number."""
    from thermonet import interrupt, parallel
    from thermonet.runner import detach_log

    root = parallel.active_world().is_root
    if banner and not quiet:
        click.echo(banner, err=True)
    with interrupt.handling() as stop:
        try:
            run_ = open_run()
            try:
                run_.run(RunProgress(quiet))
            finally:
                run_.close()
        except interrupt.RunInterrupted as err:
            if not parallel.is_collective(err) and parallel.active_world().size > 1:
                raise      # one rank only: the command line ends the job
            if root:
                click.echo(f"Stopped: {err}", err=True)
            ctx.exit(err.exit_code)
        finally:
            detach_log()
        if stop.signum is not None and root:   # arrived after the last iteration: complete
            click.echo(f"Stopped: {interrupt.signal_name(stop.signum)} arrived as the run "
                       f"finished; it is complete at iteration {run_.iteration}", err=True)
            ctx.exit(128 + stop.signum)


@click.command(short_help="Continue a run from its last checkpoint.")
@click.argument("run_dir", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--iterations", type=int, callback=in_range(COUNT), default=None,
              help="New total number of iterations (extends the run).")
@click.option("--workers", type=int, callback=in_range(COUNT),
              default=None, help="Threads for replicas (any number "
              "gives the same result; in each rank under MPI).")
@click.option("--executor", type=click.Choice(["auto", "threads", "mpi"]), default=None,
              help="Where replicas run (any choice gives the same result) [default: auto: "
              "MPI under mpiexec or srun, else threads].")
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.pass_context
def resume(ctx: click.Context, run_dir: str, iterations: int | None, workers: int | None,
           executor: str | None, quiet: bool) -> None:
    """Continue the run in DIR from its last checkpoint, exactly as if it had never stopped.

    Records written after the last checkpoint (by a run that was killed) are discarded and
    regenerated identically. Ctrl-C or SIGTERM stop it at the next safe point (exit status 130
    or 143); a refused resume changes nothing. Any executor and any number of ranks or threads
    continues it (`mpiexec -n 4 thermonet resume DIR` a run started on threads, or the reverse).
    """
    _keep_backend(Path(run_dir))
    from thermonet import parallel
    from thermonet.runner import Run

    quiet = quiet_terminal(ctx, quiet or not parallel.world(executor or "auto").is_root)

    def open_run() -> Any:
        run_ = Run.open(Path(run_dir), n_iterations=iterations, workers=workers,
                        executor=executor)
        if not quiet:
            click.echo(f"resuming {run_dir} at iteration {run_.iteration}", err=True)
        return run_

    _advance(ctx, open_run, quiet, "")
    if not quiet:
        click.echo(f"done: the run in {run_dir} is complete  (summary: thermonet info "
                   f"{run_dir})", err=True)


def _keep_backend(run_dir: Path) -> None:
    """Resume with the matrix-product backend the checkpoint was written with (the two round
    differently), unless THERMONET_BLAS names one: before any kernel is imported, which fixes
    the process's backend."""
    from thermonet.io.checkpoint import recorded_backend
    from thermonet.kernels.matmul import backend

    recorded = recorded_backend(run_dir)
    if recorded and not backend.chosen():
        backend.pin(recorded, f"the backend the run's checkpoint was written with ({recorded})")


def _fmt(v: float) -> str:
    return "nan" if isinstance(v, float) and math.isnan(v) else f"{v:.4g}"


def _rhat(v: float) -> str:
    return "nan" if math.isnan(v) else f"{v:.3f}"


#: the terms ``info`` prints, one plain sentence each (``info --explain``; docs/analysis.md)
TERMS: dict[str, str] = {
    "restarts": "how many times a replica arrived at the coldest temperature after visiting "
                "the hottest, i.e. brought a configuration from the quickly mixing hot end "
                "down to the cold end.",
    "round trips": "coldest -> hottest -> coldest journeys of one replica; never more than "
                   "the restarts.",
    "ELE": "efficient local exploration: the ideal in which every round of local moves gives "
           "each replica a fresh energy, so a swap succeeds independently of the past; the "
           "restarts and round trips it would give are simulated from the run's own swap "
           "acceptances.",
    "local-exploration efficiency": "the run's restarts divided by those expected under ELE: "
                                    "near 1 the ladder limits mixing (add rungs or "
                                    "iterations), far below 1 the local sampler does.",
    "replica flow": "how far the replicas that started at the cold end and at the hot end "
                    "travelled along the ladder, and whether any crossed it.",
    "barrier Lambda": "the sum of the swap rejection rates of neighbouring rungs, the "
                      "ladder's communication barrier (Syed et al. 2022): even with ideal "
                      "local moves a round trip takes about 2 + 2 Lambda iterations, however "
                      "many rungs.",
    "split R-hat": "how much the first and second halves of the kept samples disagree, "
                   "compared with their spread: near 1 (below 1.05) means they agree; with "
                   "several chains the verdict compares every chain's halves together, and a "
                   "chain's row (R-hat(E)) its own two halves.",
    "ESS": "effective sample size: how many independent draws the correlated samples are "
           "worth.",
    "verdict": "mixed or not mixed, from restarts, acceptance, split R-hat and ESS by the "
               "rules of docs/analysis.md.",
}


@click.command(short_help="Summary of a run directory.")
@click.argument("run_dir", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option("--explain", is_flag=True,
              help="Then define each term (restarts, ELE, replica flow, barrier Lambda, ...) "
                   "in one sentence.")
def info(run_dir: str, as_json: bool, explain: bool) -> None:
    """Iterations done, per-temperature acceptance, dt and mean energy (after discarding the
    first run.discard fraction), per-pair swap acceptance, round trips and restarts, elapsed
    time, and the mixing verdict (docs/analysis.md)."""
    from thermonet.analysis import summarise

    s = summarise(run_dir)
    if as_json:
        click.echo(json.dumps({**s, "terms": TERMS} if explain else s, sort_keys=True))
        return
    _summary(s)
    if explain:
        click.echo("\nterms:")
        for term, sentence in TERMS.items():
            click.echo(f"  {term}: {sentence}")


def _summary(s: dict[str, Any]) -> None:
    click.echo(f"run        {s['run_dir']}  ({s['architecture']} on {s['data']}, "
               f"{s['sampler']})")
    click.echo(f"iterations {s['iterations']} of {s['n_iterations']}  "
               f"(summaries over the last {s['iterations'] - s['discarded_iterations']})")
    ladder = (f";  round trips {s['round_trips']};  restarts {s['restarts']}"
              if len(s["temperatures"]) > 1 else "")
    click.echo(f"elapsed    {s['elapsed_s']:.1f} s;  divergences {s['divergences']}{ladder}")
    if s.get("ideal_passages"):
        from thermonet.analysis.ideal_exchange import ideal_line  # not at import: kernels

        line = ideal_line(s["restarts"], s["round_trips"], s["ideal_passages"])
        click.echo(f"replicas   {line}")
    if s.get("replica_flow"):
        from thermonet.analysis.replica_flow import ReplicaFlow, flow_line

        flow = flow_line(ReplicaFlow.from_dict(s["replica_flow"]), s["temperatures"])
        click.echo(f"           {flow}")
    if s.get("local_exploration"):
        from thermonet.analysis.local_exploration import LocalExploration, exploration_line

        le = LocalExploration.from_dict(s["local_exploration"])
        click.echo(f"           {exploration_line(le, s['temperatures'])}")
    if s.get("blas_backend"):
        reason = f" ({s['blas_reason']})" if s.get("blas_reason") else ""
        click.echo(f"blas       {s['blas_backend']}{reason}")
    rounds = s.get("ladder_rounds") or []
    warm = s.get("warmup")
    if warm:
        from thermonet.tempering.warmup import STAGE_NAMES  # not at import: kernels

        where = (f"ladder round {warm['round'] + 1}" if warm["stage"] == "ladder"
                 else STAGE_NAMES.get(warm["stage"], warm["stage"]))
        click.echo(f"ladder     in the warm-up ({where}, {warm['phase']}): not frozen yet; "
                   f"continue with `thermonet resume {s['run_dir']}`")
    elif rounds:
        path = " -> ".join(f"{r['barrier']:.3g}" for r in rounds)
        click.echo(f"ladder     adapted in {len(rounds)} warm-up rounds "
                   f"({sum(r['iterations'] for r in rounds)} iterations), barrier Lambda "
                   f"{path}, then frozen" + ("; per-rung masses" if s.get("per_rung_masses")
                                             else ""))
    retune = s.get("step_size_retune")
    if retune and not warm:
        measured = [[a for a in r["acceptance"] if a is not None] for r in retune]
        spans = ", ".join(f"{min(a):.2f}-{max(a):.2f}" for a in measured if a)
        click.echo(f"step sizes corrected in {len(retune)} rounds of {retune[0]['iterations']} "
                   f"warm-up iterations (acceptance measured {spans}), then frozen")
    budget = s.get("local_budget")
    if budget and not warm:
        n = [c for c, r in zip(budget["trajectories"], budget["rho1"], strict=True)
             if r is not None]
        click.echo(f"local budget {min(n, default=0)}-{max(n, default=0)} trajectories per "
                   f"swap round, chosen from rho1 over {budget['iterations']} warm-up "
                   f"iterations (total {sum(n)}, as uniform), then frozen")
    rho = (s.get("local_exploration") or {}).get("rho1") or [math.nan] * len(s["temperatures"])
    chains = int(s.get("chains", 1))
    # a one-rung run of several chains: one row per chain, at the one temperature, with
    # the split R-hat of the chain's own energy (its two halves)
    chain_rhat = s.get("chain_rhat") if chains > 1 else None
    # independent chains neither swap nor have swap rounds: no swap or rho1 column
    ladder_cols = chains == 1
    click.echo(f"{'chain' if chains > 1 else 'slot':>4} {'T':>10} {'accept':>7} {'dt':>10} "
               f"{'<E>':>12}" + (f" {'swap->next':>10} {'rho1(E)':>8}" if ladder_cols else "")
               + (f" {'R-hat(E)':>8}" if chain_rhat else ""))
    slot_t = [t for t in s["temperatures"] for _ in range(chains)]
    rho = rho if len(rho) == len(slot_t) else [math.nan] * len(slot_t)
    for k, t in enumerate(slot_t):
        sw = s["swap_acceptance"][k] if k < len(s["swap_acceptance"]) else None
        own = f" {_rhat(chain_rhat[k]):>8}" if chain_rhat else ""
        swap_rho = (f" {'' if sw is None else _fmt(sw):>10} {_fmt(rho[k]):>8}"
                    if ladder_cols else "")
        click.echo(f"{k:>4} {t:>10.4g} {_fmt(s['acceptance'][k]):>7} {s['dt'][k]:>10.4g} "
                   f"{_fmt(s['mean_energy'][k]):>12}{swap_rho}{own}")
    hyper = s.get("hyperparameters") or {}
    for k, row in enumerate(hyper.get("width", [])):
        cells = ", ".join(f"{n} {v:.4g} ± {e:.2g}" for n, v, e in
                          zip(hyper["names"], row, hyper["width_err"][k], strict=True))
        where = (f"chain {k}" if chains > 1 else f"T = {s['temperatures'][k]:.4g}")
        click.echo(f"hyper      {where}: {cells}")
    click.echo(f"verdict    {s['verdict']}")
