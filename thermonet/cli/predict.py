"""``thermonet predict``: the posterior predictive of a run's stored samples on new data."""

from __future__ import annotations

import json

import click

from thermonet.cli.options import in_range
from thermonet.ranges import FRACTION, POSITIVE


@click.command(short_help="Predict new cases with a run's stored samples.")
@click.argument("run_dir", metavar="RUN", type=click.Path(file_okay=False))
@click.argument("data", metavar="DATA")
@click.option("--temperature", "-T", type=float, callback=in_range(POSITIVE), default=None,
              help="A rung of the run's ladder [default: T = 1 if it is a rung, else the "
                   "lowest].")
@click.option("--discard", type=float, callback=in_range(FRACTION), default=None,
              help="Burn-in fraction of iterations [default: the run's run.discard].")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="Write the per-case predictions: .csv, .npz or .nc "
                                   "(NetCDF, needs xarray).")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object (the scores and what was predicted) on stdout.")
@click.option("--mnist-dir", type=click.Path(file_okay=False), default=None,
              envvar="THERMONET_MNIST_DIR",
              help="Directory of the MNIST IDX files, if the run's data need them.")
def predict(run_dir: str, data: str, temperature: float | None, discard: float | None,
            out_path: str | None, as_json: bool, mnist_dir: str | None) -> None:
    """The posterior predictive of the stored samples of the run in RUN on the cases in DATA.

    DATA is read as the run's own data were. Regression: a CSV, NPZ or HDF5 file with the
    run's input columns (and, to score the predictions, its output columns), standardised
    with the run's constants; predictions are in the file's units. Classification: a data
    set name (D500, mnist-t10k), an IDX image file (labels from the labels-idx1 file beside
    it), or an NPZ of 'images' (n, 28, 28) and 'labels'. "train" and "test" are the run's own
    sets.

    Per case: regression, the mean, standard deviation and 5/50/95 % quantiles of the
    network function f and of a new observation (noise included; y_* columns);
    classification, the class probabilities (the average of the stored networks'). With
    targets: squared error, log loss, error rate (classification) and Brier score, each the
    mean over cases ± its standard error.

    \b
    Examples:
        thermonet predict runs/robot_arm new_cases.csv --out predictions.csv
        thermonet predict runs/quickstart mnist-t10k --temperature 1 --json
    """
    from pathlib import Path

    from thermonet.analysis.prediction import OUTPUT_SUFFIXES
    from thermonet.analysis.run_record import open_run
    from thermonet.errors import ConfigError
    from thermonet.io.outputs import check_output

    if out_path is not None:
        check_output(out_path)     # never the run's own files, and before any work
        if Path(out_path).suffix.lower() not in OUTPUT_SUFFIXES:
            raise ConfigError(f"--out {out_path}: suffix {Path(out_path).suffix!r}; expected "
                              ".csv, .npz or .nc")
    rec = open_run(run_dir, discard=discard)
    pred = rec.predict(data, temperature, mnist_dir=mnist_dir)
    written = pred.write(out_path) if out_path is not None else None
    if as_json:
        doc = {**pred.to_dict(), "run_dir": run_dir, "discard": rec.discard,
               "out": None if written is None else str(written)}
        click.echo(json.dumps(doc, sort_keys=True, allow_nan=True))
        return
    click.echo(pred.describe())
    if written is not None:
        click.echo(f"wrote {written}")
