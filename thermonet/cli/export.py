"""``thermonet export``: a run's trace as an ArviZ InferenceData netCDF file."""

from __future__ import annotations

import click


@click.command(short_help="Write a run's per-temperature trace as ArviZ InferenceData (.nc).")
@click.argument("run_dir", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              metavar="FILE.nc", help="The netCDF file to write (replaced if it exists).")
def export(run_dir: str, out_path: str) -> None:
    """Write the per-temperature observables of the run in DIR to FILE.nc as ArviZ
    InferenceData, dims (chain = 1, draw = iteration, temperature): the training energy
    (posterior), acceptance, accepted and divergent trajectories, step size, the replica at
    each slot, and swaps per adjacent pair (sample_stats). Needs the optional ArviZ
    (pip install 'thermonet[arviz]'); read the file with arviz.from_netcdf.

    \b
    Example:
        thermonet export runs/quickstart --out quickstart.nc
    """
    from thermonet.analysis.export import export_run
    from thermonet.io.outputs import check_output

    check_output(out_path)     # never the run's own files, and before reading the trace
    path = export_run(run_dir, out_path)
    click.echo(f"wrote {path}")
