"""``thermonet mackay``: architecture selection by MacKay's evidence framework."""

from __future__ import annotations

import json
import math
from typing import Any

import click

from thermonet.cli.options import in_range
from thermonet.ranges import COUNT, NON_NEGATIVE_INT, POSITIVE


@click.command(short_help="MacKay's evidence framework: an architecture sweep.")
@click.option("--data", "data_name", default=None,
              help="A data set with a test split [default: robot-arm; with --arch: D500].")
@click.option("--arch", "archs", default=None,
              help="Compare these classifiers instead (comma-separated architecture names, "
              "e.g. M1,M3), each with a Gaussian prior per layer.")
@click.option("--groups", "grouping", type=click.Choice(["layer", "weights-biases"]),
              default="layer", show_default=True,
              help="With --arch: one weight decay per layer, or per layer's weights and biases.")
@click.option("--curvature", type=click.Choice(["gauss-newton", "exact"]), default="gauss-newton",
              show_default=True, help="With --arch: the Hessian A of the classifiers, exact or "
              "the positive definite Gauss-Newton form (the exact one of M1 on D500 was "
              "indefinite at w_MP).")
@click.option("--newton-steps", type=int, default=None, callback=in_range(NON_NEGATIVE_INT),
              help="Newton steps after each minimisation [default: 4; with --arch: 0, each "
              "costs a Hessian and its factorisation].")
@click.option("--hidden", default="1-10", show_default=True,
              help="Hidden units to try: a range and/or list, e.g. 1-10 or 1,2,4,8.")
@click.option("--restarts", type=int, default=3, show_default=True, callback=in_range(COUNT),
              help="Random starts per architecture.")
@click.option("--seed", type=int, callback=in_range(NON_NEGATIVE_INT), default=0, show_default=True,
              help="Seed of every start (each (H, restart) has its own stream).")
@click.option("--activation", type=click.Choice(["tanh", "logistic"]), default="tanh",
              show_default=True, help="Hidden units' activation.")
@click.option("--max-iter", type=int, default=100, show_default=True, callback=in_range(COUNT),
              help="Re-estimation cycles at most per network.")
@click.option("--tol", type=float, default=1e-4, show_default=True, callback=in_range(POSITIVE),
              help="Convergence: every |change| of ln alpha_c and ln beta below this.")
@click.option("--hessian", "hessian_method", type=click.Choice(["auto", "fd"]), default="auto",
              show_default=True, help="The Hessian A: auto = exact (compiled closed form for one "
              "hidden layer), fd = central differences of the gradient.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Write MacKay's Fig. 2b analogue (log evidence vs test error) here.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="Keep the rows in this JSON file, rewritten (atomically) after every "
              "network, so an interrupted sweep keeps what it finished.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the rows as JSON instead (progress still goes to stderr).")
@click.option("--quiet", is_flag=True, help="No progress output.")
def mackay(data_name: str | None, archs: str | None, grouping: str, curvature: str,
           newton_steps: int | None,
           hidden: str, restarts: int, seed: int, activation: str,
           max_iter: int, tol: float, hessian_method: str, plot_path: str | None,
           out_path: str | None, as_json: bool, quiet: bool) -> None:
    """Train networks of each width by MacKay's framework and rank them by evidence.

    Every network (one hidden layer, ``mlp-regression`` with three weight groups and an
    unknown noise level) is trained to w_MP while its weight decays alpha_c and noise
    precision beta are re-estimated (gamma_c = k_c - alpha_c Tr_c A^-1); then its log
    evidence is printed with its terms: best-fit likelihood, Occam factor of the weights,
    Occam factors of the hyperparameters, and the hidden-unit symmetry ln(H!) (+ H ln 2 for
    tanh). The last line is the rank correlation of evidence and test error (MacKay 1992,
    Fig. 2b).

    With --arch the classifiers named (e.g. the paper's M1 and M3) are compared instead, on
    MNIST subsets (D500 by default), by MacKay's classification framework: cross-entropy, a
    Gaussian prior per layer, no noise level; the table gives their test error rate and
    cross-entropy at w_MP.

    \b
    Example:
      thermonet mackay --hidden 1-10 --restarts 3 --plot mackay.png
      thermonet mackay --arch M1,M3 --data D500 --restarts 1 --out m1m3.json
    """
    from thermonet.evidence.mackay.sweep import mackay_sweep, parse_hidden

    if plot_path is not None:
        from thermonet.plotting.figure import check_out

        check_out(plot_path)

    done: list[dict[str, Any]] = []
    if out_path is not None:
        from thermonet.io.outputs import check_output

        check_output(out_path)
    if archs is not None:
        _classifiers(archs, data_name or "D500", grouping, curvature, restarts, seed, max_iter,
                     tol, 0 if newton_steps is None else newton_steps, out_path, as_json, quiet)
        return
    widths = parse_hidden(hidden)
    data_name = data_name or "robot-arm"

    def progress(row: Any) -> None:
        if out_path is not None:
            from thermonet.io.atomic import write_json

            done.append(row.as_dict())
            write_json(out_path, {"command": "mackay", "data": data_name, "hidden": widths,
                                  "restarts": restarts, "seed": seed, "activation": activation,
                                  "max_iter": max_iter, "tol": tol,
                                  "hessian": hessian_method, "rows": done})
        if not quiet:
            click.echo(f"H = {row.hidden} restart {row.restart}: log evidence "
                       f"{row.log_evidence:.2f}, test error {row.test_error:.5f} "
                       f"({row.seconds:.1f} s)", err=True)

    rows = mackay_sweep(widths, restarts, seed=seed, activation=activation, data=data_name,
                        progress=progress, max_iter=max_iter, tol=tol,
                        hessian_method=hessian_method,
                        newton_steps=4 if newton_steps is None else newton_steps)
    _print_sweep(rows, as_json)
    if plot_path is not None:
        from thermonet.plotting.mackay import plot_mackay_sweep

        plot_mackay_sweep(rows, plot_path)


def _print_sweep(rows: list[Any], as_json: bool) -> None:
    """The sweep's table, its best network and the rank correlation (or one JSON object)."""
    from thermonet.evidence.mackay.sweep import format_table, rank_correlation

    rho = rank_correlation(rows)
    if as_json:
        out = {"rows": [r.as_dict() for r in rows],
               "rank_correlation": None if math.isnan(rho) else rho}
        click.echo(json.dumps(out, default=float))
    else:
        click.echo(format_table(rows))
        best = max((r for r in rows if math.isfinite(r.log_evidence)),
                   key=lambda r: r.log_evidence, default=None)
        if best is not None:
            click.echo(f"best evidence: H = {best.hidden} (restart {best.restart}), log "
                       f"evidence {best.log_evidence:.2f}, test error {best.test_error:.5f}")
        click.echo(f"Spearman rank correlation (log evidence, test error), converged "
                   f"solutions: {rho:.3f}")


def _classifiers(archs: str, data_name: str, grouping: str, curvature: str, restarts: int,
                 seed: int,
                 max_iter: int, tol: float, newton_steps: int, out_path: str | None,
                 as_json: bool, quiet: bool) -> None:
    """``--arch``: classifiers compared by their evidence."""
    from thermonet.errors import ConfigError
    from thermonet.evidence.mackay.models import (
        best_line,
        compare_classifiers,
        format_classifiers,
        progress_line,
    )

    names = [a.strip() for a in archs.split(",") if a.strip()]
    if not names:
        raise ConfigError(f"--arch {archs!r}; expected architecture names, e.g. M1,M3")
    done: list[dict[str, Any]] = []

    def progress(row: Any) -> None:
        if out_path is not None:
            from thermonet.io.atomic import write_json

            done.append(row.as_dict())
            write_json(out_path, {"command": "mackay", "arch": names, "data": data_name,
                                  "groups": grouping, "curvature": curvature,
                                  "restarts": restarts, "seed": seed,
                                  "max_iter": max_iter, "tol": tol,
                                  "newton_steps": newton_steps, "rows": done})
        if not quiet:
            click.echo(progress_line(row), err=True)

    import time

    t0 = time.monotonic()

    def cycle(record: dict[str, Any]) -> None:
        if not quiet:
            alphas = ", ".join(f"{a:.3g}" for a in record["hyper"])
            click.echo(f"  cycle {record['iter']}: alpha {alphas}; max |change of ln alpha| "
                       f"{record['change']:.3g}, gamma {record['gamma']:.1f}, M(w_MP) "
                       f"{record['energy']:.2f} ({time.monotonic() - t0:.0f} s)", err=True)

    rows = compare_classifiers(names, data_name, restarts, seed=seed, grouping=grouping,
                               progress=progress, max_iter=max_iter, tol=tol,
                               newton_steps=newton_steps, on_cycle=cycle,
                               curvature=curvature)
    if as_json:
        click.echo(json.dumps({"rows": [r.as_dict() for r in rows]}, default=float))
        return
    click.echo(format_classifiers(rows))
    best = best_line(rows)
    if best is not None:
        click.echo(best)
