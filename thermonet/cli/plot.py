"""``thermonet plot``: figures of one or several run directories."""

from __future__ import annotations

from typing import Any

import click

from thermonet.cli.options import in_range, is_quiet
from thermonet.ranges import COUNT, FRACTION, POSITIVE

#: the kinds, in the order the help lists them (kept in step with thermonet.plotting.KINDS,
#: which a test checks, so that this module need not import the plotting code for --help)
KIND_CHOICES = ("replicas", "energy", "size", "ladder", "heat", "barrier", "flow",
                "exploration", "predictive", "errors")


@click.command(short_help="Figures of runs: replicas, energy, size, ladder, heat, barrier, "
                          "flow, exploration, predictive, errors.")
@click.argument("run_dirs", metavar="DIR [DIR ...]", nargs=-1, required=True,
                type=click.Path(file_okay=False))
@click.option("--kind", required=True, type=click.Choice(KIND_CHOICES),
              help="Which figure (see below).")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Output file; the format comes from its suffix: .png, .pdf or .svg.")
@click.option("--baseline", "baselines", multiple=True, metavar="PATH|none",
              help="energy: the JSON of `thermonet baseline --json` for each DIR, in order "
                   "(repeat once per DIR; 'none' for a DIR without).")
@click.option("--discard", type=float, callback=in_range(FRACTION), default=None,
              help="Burn-in fraction of iterations to drop [default: each run's run.discard].")
@click.option("--follow", type=click.Choice(("slot", "replica")), default="slot",
              show_default=True,
              help="replicas: one line per temperature slot or per replica.")
@click.option("--temperature", type=float, callback=in_range(POSITIVE),
              default=1.0, show_default=True,
              help="size: the temperature to read the training energy at; predictive, "
                   "errors: the rung nearest it.")
@click.option("--band", type=float, nargs=2, default=(5.0, 95.0), show_default=True,
              metavar="LO HI", help="predictive: the band's percentiles of the sampled outputs.")
@click.option("--noise", is_flag=True,
              help="predictive: the band of a new observation (each network's output plus "
                   "the noise of its sample), not of the regression function.")
@click.option("--nearest", is_flag=True,
              help="size: take the nearest ladder temperature instead of interpolating in "
                   "log T.")
@click.option("--no-test", is_flag=True,
              help="energy: training data only (no evaluation of the samples on test data).")
@click.option("--predictive", is_flag=True,
              help="energy: also the test energy of the Bayesian predictive.")
@click.option("--per-point", is_flag=True,
              help="heat: divide by the number of training points.")
@click.option("--workers", type=int, callback=in_range(COUNT), default=1, show_default=True,
              help="energy: threads evaluating the samples on the test data.")
@click.option("--mnist-dir", type=click.Path(file_okay=False), default=None,
              help="energy/size/heat/predictive/errors: MNIST location for a complement test set "
                   "[default: "
                   "$THERMONET_MNIST_DIR].")
@click.option("--from-analysis", is_flag=True,
              help="energy/size/heat: use DIR/analysis.h5 saved by `thermonet analyse DIR` "
                   "(checked to be current) instead of analysing again.")
@click.option("--dpi", type=float, callback=in_range(POSITIVE),
              default=150, show_default=True, help="Resolution (png).")
@click.pass_context
def plot(ctx: click.Context, run_dirs: tuple[str, ...], kind: str, out_path: str,
         baselines: tuple[str, ...], discard: float | None, follow: str, temperature: float,
         nearest: bool, no_test: bool, predictive: bool, per_point: bool, workers: int,
         mnist_dir: str | None, from_analysis: bool, dpi: float,
         band: tuple[float, float], noise: bool) -> None:
    """Draw a figure of the runs in DIR ... and write it to --out.

    \b
    Kinds:
      replicas  E(D|w) of every slot (or replica, --follow replica) over the iterations,
                coloured by log T (paper Fig. 2); one figure per DIR, stacked
      energy    <E>_T per data point on training and test data versus T, several DIRs on
                one plot, with ln 10 (uninformed classifier) and --baseline lines
                (paper Figs. 3, 4)
      size      training <E> per data point at T = 1 versus training-set size, one point
                per DIR (blog Fig. 3)
      ladder    swap acceptance, replica paths, dt and acceptance per T (2x2)
      heat      heat capacity Var(E)/T^2 versus T
      barrier   local communication barrier lambda(beta) from each pair's swap
                rejection, and the cumulative barrier Lambda (Syed et al. 2022)
      flow      each slot's time split by the end its replica visited last (cold,
                neither, hot): where replicas from each end stop (Katzgraber et al. 2006)
      exploration  per rung, the lag-1 autocorrelation of a replica's standardised energy
                across its local moves (0 under ideal local exploration), with restarts
                and round trips per 10^6 gradients
      predictive  regression runs: the predictive mean and a --band of the sampled
                networks' outputs against the test targets, and along a slice through
                each input (the others at their training mean); one DIR
      errors    regression runs: training and test squared error of each stored network
                (every chain's) and the test error of their running average over the
                iterations, pooled over the chains as predict pools them (Neal 1993
                Fig. 2); one DIR or several, stacked

    \b
    Examples:
        thermonet plot runs/quickstart --kind replicas --out replicas.png
        thermonet plot runs/D50 runs/D500 --kind energy --out fig3.pdf \\
            --baseline base_D50.json --baseline base_D500.json
        thermonet plot runs/D50 runs/D500 runs/D5000 --kind size --out size.svg
        thermonet plot runs/robot_arm --kind predictive --out arm.png
        thermonet plot runs/robot_arm --kind errors --out arm_errors.png
    """
    from thermonet import plotting
    from thermonet.errors import PlotError
    from thermonet.io.outputs import check_output

    check_output(out_path)       # a directory, a path below a file, an unwritable directory
    plotting.check_out(out_path)
    options: dict[str, Any] = {"discard": discard}
    if from_analysis and kind not in ("energy", "size", "heat"):
        raise PlotError(f"--from-analysis applies to --kind energy, size or heat (got --kind "
                        f"{kind}, which reads only the trace)")
    if from_analysis and baselines:
        raise PlotError("--baseline cannot be combined with --from-analysis: the baseline is "
                        "part of the stored analysis (`thermonet analyse DIR --baseline PATH`)")
    if kind in ("energy", "size", "heat"):
        options["mnist_dir"] = mnist_dir
        if from_analysis:
            plotting.check_out(out_path)
            need_test = kind == "energy" and not no_test
            options["analyses"] = [
                plotting.stored_analysis(d, test=need_test, predictive=need_test and predictive,
                                         discard=discard) for d in run_dirs]
    if noise and kind != "predictive":
        raise PlotError(f"--noise applies to --kind predictive only (got --kind {kind})")
    if baselines and kind != "energy":
        raise PlotError(f"--baseline applies to --kind energy only (got --kind {kind})")
    options.update(_kind_options(ctx.params))
    plotting.plot(kind, list(run_dirs), out_path, dpi=dpi, **options)
    if not is_quiet(ctx):
        click.echo(f"wrote {out_path}", err=True)


def _kind_options(params: dict[str, Any]) -> dict[str, Any]:
    """The options of the plot of ``--kind`` from the command's parameters."""
    from thermonet.errors import PlotError

    kind = params["kind"]
    run_dirs = params["run_dirs"]
    baselines = params["baselines"]
    from_analysis = params["from_analysis"]
    no_test = params["no_test"]
    predictive = params["predictive"]
    workers = params["workers"]
    follow = params["follow"]
    per_point = params["per_point"]
    temperature = params["temperature"]
    nearest = params["nearest"]
    band = params["band"]
    mnist_dir = params["mnist_dir"]
    noise = params["noise"]
    options: dict[str, Any] = {}
    if kind == "energy":
        if baselines:
            if len(baselines) != len(run_dirs):
                raise PlotError(f"{len(baselines)} --baseline for {len(run_dirs)} DIR(s); give "
                                "one per DIR, in order ('none' for a DIR without)")
            options["baselines"] = [None if b.lower() == "none" else b for b in baselines]
        options.update(test=not no_test, predictive=predictive)
        if not from_analysis:
            options["workers"] = workers
    elif kind == "replicas":
        options["follow"] = follow
    elif kind == "heat":
        options["per_point"] = per_point
    elif kind == "size":
        options.update(temperature=temperature, method="nearest" if nearest else "interpolate")
    elif kind == "predictive":
        options.update(temperature=temperature, quantiles=(band[0] / 100, band[1] / 100),
                       mnist_dir=mnist_dir, noise=noise)
    elif kind == "errors":
        options.update(temperature=temperature, mnist_dir=mnist_dir)
    return options
