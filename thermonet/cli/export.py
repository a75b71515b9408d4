"""``thermonet export``: runs' traces as an ArviZ InferenceData netCDF file, one chain each."""

from __future__ import annotations

import click

from thermonet.cli.options import in_range
from thermonet.ranges import FRACTION


@click.command(short_help="Write runs' per-temperature traces as ArviZ InferenceData (.nc).")
@click.argument("run_dirs", metavar="DIR [DIR ...]", nargs=-1, required=True,
                type=click.Path(file_okay=False))
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              metavar="FILE.nc", help="The netCDF file to write (replaced if it exists).")
@click.option("--discard", type=float, callback=in_range(FRACTION), default=None,
              help="Burn-in fraction for every run [default: each run's run.discard; 0 "
                   "keeps every iteration].")
def export(run_dirs: tuple[str, ...], out_path: str, discard: float | None) -> None:
    """Write the per-temperature observables of the runs in DIR ... to FILE.nc as ArviZ
    InferenceData, dims (chain, draw, temperature): one chain per run (independent runs of
    one configuration, e.g. different run.seed; ArviZ's R-hat needs at least two), each the
    iterations after the run's discard (so the means are those of `thermonet info`), cut to
    the shortest. Temperatures are labelled T=0.147, ...; the prior rung (T = inf) is left
    out of the per-temperature groups. Groups: the training energy (posterior); acceptance,
    accepted and divergent trajectories, step size, the replica at each slot, the iteration
    number, and swaps per adjacent pair (sample_stats). Needs the optional ArviZ (pip
    install 'thermonet[arviz]'); read the file with arviz.from_netcdf.

    \b
    Examples:
        thermonet export runs/quickstart --out quickstart.nc
        thermonet export runs/seed1 runs/seed2 runs/seed3 runs/seed4 --out chains.nc
    """
    from thermonet.analysis.export import export_run
    from thermonet.io.outputs import check_output

    check_output(out_path)     # never the run's own files, and before reading the trace
    path = export_run(list(run_dirs), out_path, discard=discard)
    click.echo(f"wrote {path}")
    if len(run_dirs) == 1:
        click.echo("one chain: ArviZ's R-hat needs two or more (export independent runs of "
                   "this configuration together); `thermonet info` gives this run's split "
                   "R-hat")
