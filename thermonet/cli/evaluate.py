"""``thermonet evaluate``: energies and errors of one parameter vector."""

from __future__ import annotations

import json
import math

import click

from thermonet.cli.options import in_range
from thermonet.ranges import NON_NEGATIVE_INT, POSITIVE


def _fmt(v: float) -> str:
    return "nan" if math.isnan(v) else f"{v:.6g}"


@click.command(short_help="Energies, errors and gradient of a parameter vector.")
@click.option("--arch", "arch_name", required=True, help="Architecture name (M1, M3, M3*, ...).")
@click.option("--data", "data_name", required=True, help="Training set (D50, D500, D5000, D<n>).")
@click.option("--params", "params_path", required=True, type=click.Path(dir_okay=False),
              help=".npy, JSON with key \"x\" (the paper's files), or a thermonet HDF5 file.")
@click.option("--index", type=int, callback=in_range(NON_NEGATIVE_INT),
              default=None, help="Row of a file holding several vectors.")
@click.option("--test", "test_kind", type=click.Choice(["auto", "complement", "official"]),
              default="auto", show_default=True,
              help="Test set: every MNIST image not in the training set, or the official 10k.")
@click.option("--prior-scale", type=float, callback=in_range(POSITIVE), default=None,
              help="c in sigma_i = c/sqrt(k_i) [default: the architecture's, 100 or 2000].")
@click.option("--mnist-dir", type=click.Path(file_okay=False), default=None,
              envvar="THERMONET_MNIST_DIR", help="Directory of the MNIST IDX files.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def evaluate(arch_name: str, data_name: str, params_path: str, index: int | None,
             test_kind: str, prior_scale: float | None, mnist_dir: str | None,
             as_json: bool) -> None:
    """Evaluate a parameter vector of ARCH on a data set.

    Prints the training and test energy (total and per data point), the classification errors,
    max |dE/dw| on the training set, whether w lies inside the prior box |w_i| < sigma_i/2, and
    log prod sigma_i.

    \b
    Example:
        thermonet evaluate --arch M3 --data D500 --params localmin_data50_h3_flin.txt
    """
    from thermonet.data import load_data
    from thermonet.evaluation import evaluate as run_evaluate
    from thermonet.params import load_params
    from thermonet.priors import BoxPrior
    from thermonet.registry import get_architecture

    arch = get_architecture(arch_name)
    theta = load_params(params_path, arch.n_params, index=index)
    split = load_data(data_name, test=test_kind, mnist_dir=mnist_dir)
    prior = BoxPrior.for_architecture(arch, prior_scale)
    result = run_evaluate(arch, split, theta, prior)
    result["params_file"] = str(params_path)
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
        return
    r = result
    click.echo(f"architecture   {arch.name} ({r['n_params']} parameters)")
    click.echo(f"parameters     {params_path}")
    click.echo(f"training set   {r['train_set']} ({r['n_train']} images)")
    click.echo(f"test set       {r['test_set']} ({r['n_test']} images, {r['test_kind']})")
    click.echo(f"train energy   {_fmt(r['train_energy'])}  "
               f"({_fmt(r['train_energy_per_point'])} per point)")
    click.echo(f"test energy    {_fmt(r['test_energy'])}  "
               f"({_fmt(r['test_energy_per_point'])} per point)")
    click.echo(f"train error    {100 * r['train_error']:.2f}%")
    click.echo(f"test error     {100 * r['test_error']:.2f}%")
    click.echo(f"max |dE/dw|    {_fmt(r['max_abs_grad'])}")
    box = "yes" if r["in_prior_box"] else f"no ({r['n_outside_prior_box']} outside)"
    click.echo(f"in prior box   {box}")
    click.echo(f"log prod sigma {r['log_prior_volume']:.3f}")
