"""``thermonet evidence``: Bayesian model selection by thermodynamic integration and Laplace."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from thermonet.cli.options import in_range, is_quiet, stoppable
from thermonet.ranges import COUNT


def _kept(params: dict[str, Any]) -> str:
    """What a stopped ``evidence`` keeps, and how to go on."""
    config = params["config_path"]
    out = params["out_dir"] or Path("runs") / Path(config).stem
    return (f"every computation it finished is kept in {out}; run the same command again to "
            f"continue from there (thermonet evidence {config} --out {out})")


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _mackay(cfg: Any, out: Path, as_json: bool, quiet: bool) -> None:
    """``evidence.method = "mackay"``: MacKay's framework for every model of the config."""
    from thermonet.evidence.mackay.models import (
        best_line,
        format_classifiers,
        progress_line,
        run_config,
    )

    def progress(row: Any) -> None:
        if not quiet:
            click.echo(progress_line(row), err=True)

    if not quiet:
        click.echo(f"evidence directory: {out} (MacKay's framework)", err=True)
    rows = run_config(cfg, out, progress=progress)
    if as_json:
        click.echo(json.dumps(_json_safe({"method": "mackay",
                                          "rows": [r.as_dict() for r in rows]}),
                              sort_keys=True, default=str))
        return
    click.echo(format_classifiers(rows))
    best = best_line(rows)
    if best is not None:
        click.echo(best)


@click.command(short_help="Evidence of each model (TI and Laplace) and the Bayes factors.")
@click.argument("config_path", metavar="CONFIG.toml", type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Result directory [default: runs/<config name>]; re-running on the same "
                   "directory continues it.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config value, e.g. --set ti.n_bridges=20 (repeatable).")
@click.option("--workers", type=int, callback=in_range(COUNT), default=None,
              help="Threads running minimisations and TI runs (never changes the result).")
@click.option("--no-convergence", is_flag=True,
              help="Skip the convergence report (quick look); the numbers are marked "
                   "unchecked.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the summary as one JSON object on stdout instead of the table.")
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.pass_context
@stoppable(_kept)
def evidence(ctx: click.Context, config_path: str, out_dir: str | None, sets: tuple[str, ...],
             workers: int | None, no_convergence: bool, as_json: bool, quiet: bool) -> None:
    """Compute the evidence of every model in CONFIG.toml and the log Bayes factors.

    For each model: find its minima (or load them), run thermodynamic integration (repeats
    in parallel) and the Laplace approximation at the same minimum, then print model, d,
    E(w0), log ∫, log ∏σ, log evidence ± error, the Laplace estimate beside it, and
    ln[p(B|D)/p(A|D)] ± error. The convergence report reruns each TI with the reference k
    x0.5 and x2, twice the λ points, twice the samples, the reverse sweep and another seed; an
    estimate that disagrees is marked NOT CONVERGED and the command exits with status 3.

    Everything is stored in --out (summary.json, summary.h5, table.txt, each run's files);
    running the same command again continues an interrupted calculation, and a directory
    holding a different configuration is refused. Under `mpiexec -n R` (or srun) the ranks
    share the minimisations, TI and Laplace runs in contiguous blocks (--out on a file system
    every rank sees); the numbers are those of one process.

    With ``[evidence] method = "mackay"`` each model is instead put through MacKay's
    framework for classifiers (a Gaussian prior per weight group, re-estimated weight
    decays, eq. 7 with its Occam factors and the symmetry term; settings in ``[mackay]``), as
    ``thermonet mackay --arch`` does, and the table gives each model's log evidence and its
    terms, test error and cross-entropy.

    \b
    Examples:
        thermonet evidence sample_runs/evidence_M1_vs_M3_D500_quick.toml --out runs/ev_quick
        thermonet evidence CONFIG.toml --set evidence.method=mackay --out runs/ev_mackay
        thermonet evidence sample_runs/evidence_M1_vs_M3_D500.toml --set ti.method=paper
        mpiexec -n 8 thermonet evidence sample_runs/evidence_M1_vs_M3_D500.toml
    """
    from thermonet import config as cfgmod
    from thermonet import parallel
    from thermonet.evidence import config as evcfg
    from thermonet.evidence.run import (
        EXIT_NOT_CONVERGED,
        format_convergence,
        format_table,
        run_evidence,
    )
    from thermonet.io.outputs import refuse_owned
    from thermonet.runner import detach_log

    overrides = cfgmod.parse_set(list(sets), "evidence.seed=2")
    commandline: dict[str, Any] = {}
    if workers is not None:
        commandline["evidence.workers"] = workers
    if no_convergence:
        commandline["evidence.convergence"] = False
    cfg = evcfg.load(config_path, overrides, commandline)
    out = Path(out_dir) if out_dir else Path("runs") / Path(config_path).stem
    refuse_owned(out)     # never inside another run's kept files (its trace/)
    if cfg["evidence"]["method"] == "mackay":
        _mackay(cfg, out, as_json, is_quiet(ctx, quiet))
        return
    job = parallel.world(cfg["evidence"]["executor"])   # under MPI rank 0 speaks
    parallel.require_same_backend(job)
    q = is_quiet(ctx, quiet) or not job.is_root
    if not q:
        click.echo(f"evidence directory: {out}", err=True)
    try:
        summary = run_evidence(cfg, out, quiet=q, world=job)
    finally:
        detach_log()
    if not job.is_root:
        if summary["converged"] is False:
            ctx.exit(EXIT_NOT_CONVERGED)
        return
    if as_json:
        click.echo(json.dumps(_json_safe(summary), sort_keys=True, default=str))
    else:
        click.echo(format_table(summary))
        click.echo("")
        click.echo(format_convergence(summary))
    if summary["converged"] is False:
        if not q:
            click.echo(f"NOT CONVERGED: see the convergence report in {out}/table.txt",
                       err=True)
        ctx.exit(EXIT_NOT_CONVERGED)
