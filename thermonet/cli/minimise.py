"""``thermonet minimise``: minimise E(D|w) from a standard initial draw or a parameter file."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import click

from thermonet.cli.minimiser_options import build_minimiser, common_options, fmt, output_error
from thermonet.cli.options import ProgressLine, in_range, is_quiet
from thermonet.ranges import NON_NEGATIVE_INT


@click.command(short_help="Minimise E(D|w) from a standard initial draw (RMin or FIRE).")
@common_options
@click.option("--seed", type=int, callback=in_range(NON_NEGATIVE_INT), default=0, show_default=True,
              help="Seed of the initial draw (ignored with --init).")
@click.option("--draw", "draw_index", type=int, callback=in_range(NON_NEGATIVE_INT),
              default=0, show_default=True,
              help="Use the initial draw of `thermonet baseline --seed SEED` number DRAW.")
@click.option("--init", "init_path", type=click.Path(dir_okay=False), default=None,
              help="Start from this parameter file instead of a draw (.npy, JSON, HDF5).")
@click.option("--index", type=int, callback=in_range(NON_NEGATIVE_INT),
              default=None, help="Row of an --init file holding several "
              "vectors.")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Where to save the minimum (.npy, or .json as {\"x\": [...]}; checked to be "
                   "writable before any work).")
@click.pass_context
def minimise(ctx: click.Context, arch_name: str, data_name: str, minimiser_name: str,
             sets: tuple[str, ...], test_kind: str, prior_scale: float | None,
             mnist_dir: str | None, as_json: bool, seed: int, draw_index: int,
             init_path: str | None, index: int | None, out_path: str) -> None:
    """Minimise the training energy E(D|w) of ARCH and save the minimum.

    Starts from the standard initialisation w_i ~ U(-1/sqrt(k_i), 1/sqrt(k_i)) drawn with
    --seed (the same draw as number --draw of `thermonet baseline --seed SEED`), or from
    --init. Prints E, max |dE/dw|, the steps taken, why the minimiser stopped, and the
    training and test energies and errors at the minimum.

    \b
    Examples:
        thermonet minimise --arch M1 --data D500 --out w.npy
        thermonet minimise --arch M3 --data D500 --set max_steps=30000 --out w.npy
        thermonet minimise --arch M3 --data D500 --minimiser fire --set grad_tol=1e-5 --out w.npy
    """
    from thermonet.api.minimiser import accepts_callback  # not at import: kernels
    from thermonet.data import load_data
    from thermonet.errors import ConfigError
    from thermonet.evaluation import evaluate
    from thermonet.priors import BoxPrior
    from thermonet.registry import get_architecture

    _check_params_out(out_path)    # before the minimisation, which may take hours
    if draw_index < 0:
        raise ConfigError(f"--draw {draw_index}; expected a draw number >= 0")
    if seed < 0:
        raise ConfigError(f"--seed {seed}; expected a non-negative integer")
    arch = get_architecture(arch_name)
    mini = build_minimiser(minimiser_name, sets)
    theta0, start = _starting_point(arch, seed, draw_index, init_path, index)
    split = load_data(data_name, test=test_kind, mnist_dir=mnist_dir)
    prior = BoxPrior.for_architecture(arch, prior_scale)
    potential = arch.potential(split.train)

    line = ProgressLine(is_quiet(ctx))
    budget = getattr(getattr(mini, "config", None), "max_steps", None)

    def callback(step: int, energy: float, g_max: float, dt: float) -> None:
        rate = step / max(line.elapsed(), 1e-9)
        of = f"/{budget}" if budget else ""
        line.show(f"{mini.name}: step {step}{of}  E {energy:.6g}  max|dE/dw| {g_max:.3g}  "
                  f"dt {dt:.3g}  {rate:.0f} steps/s")

    kwargs = {"callback": callback} if accepts_callback(mini) else {}
    t0 = time.perf_counter()
    result = mini.minimise(potential, theta0, prior=prior, **kwargs)
    seconds = time.perf_counter() - t0
    line.close()
    _save_params(out_path, result.theta)
    ev = evaluate(arch, split, result.theta, prior)
    out = {
        "minimiser": mini.name,
        "settings": _jsonable_config(mini),
        "start": start,
        "out": str(out_path),
        "energy": result.energy,
        "max_abs_grad": result.max_abs_grad,
        "n_steps": result.n_steps,
        "n_grad_evals": result.n_grad_evals,
        "reason": result.reason,
        "converged": result.converged,
        "seconds": seconds,
        **{k: ev[k] for k in ("train_set", "n_train", "test_set", "n_test", "test_kind",
                              "train_energy_per_point", "test_energy", "test_energy_per_point",
                              "train_error", "test_error", "in_prior_box",
                              "n_outside_prior_box")},
    }
    if as_json:
        click.echo(json.dumps(out, sort_keys=True))
        return
    _print(out, ev)
    if result.reason == "step budget" and not is_quiet(ctx):
        click.echo("hint: the step budget ran out; raise it with --set max_steps=N "
                   "(M3 on D500 needs ~1e4 steps)", err=True)


def _starting_point(arch: Any, seed: int, draw_index: int, init_path: str | None,
                    index: int | None) -> tuple[Any, str]:
    """The starting parameters (row ``index`` of ``init_path``, else draw ``draw_index`` of
    the standard initialisation from ``seed``) and how to describe them."""
    import numpy as np

    from thermonet.params import load_params

    if init_path is not None:
        return load_params(init_path, arch.n_params, index=index), str(init_path)
    child = np.random.SeedSequence(seed).spawn(draw_index + 1)[draw_index]
    theta0 = arch.initial_draw(np.random.default_rng(child))
    return theta0, f"standard initialisation, seed {seed}, draw {draw_index}"


def _print(out: dict[str, Any], ev: dict[str, Any]) -> None:
    """The result of ``thermonet minimise`` as text (``out`` is its JSON record, ``ev`` the
    evaluation at the minimum)."""
    click.echo(f"minimiser      {out['minimiser']} ({out['start']})")
    click.echo(f"stopped        {out['reason']} after {out['n_steps']} steps "
               f"({out['n_grad_evals']} gradients, {out['seconds']:.2f} s)")
    click.echo(f"train energy   {fmt(out['energy'])}  "
               f"({fmt(ev['train_energy_per_point'])} per point, {ev['train_set']})")
    click.echo(f"max |dE/dw|    {fmt(out['max_abs_grad'])}")
    click.echo(f"test energy    {fmt(ev['test_energy'])}  "
               f"({fmt(ev['test_energy_per_point'])} per point, {ev['test_set']}, "
               f"{ev['test_kind']})")
    click.echo(f"train error    {100 * ev['train_error']:.2f}%")
    click.echo(f"test error     {100 * ev['test_error']:.2f}%")
    box = "yes" if ev["in_prior_box"] else f"no ({ev['n_outside_prior_box']} outside)"
    click.echo(f"in prior box   {box}")
    click.echo(f"saved          {out['out']}")


def _check_params_out(path: str) -> None:
    from thermonet.errors import ConfigError
    from thermonet.io.outputs import check_output

    suffix = Path(path).suffix.lower()
    if suffix not in (".npy", ".json"):
        raise ConfigError(f"--out {path}: cannot tell the format from the suffix "
                          f"{suffix or '(none)'!r}; expected a file name ending in .npy or .json "
                          "(JSON {\"x\": [...]})")
    check_output(path)


def _save_params(path: str, theta: Any) -> None:
    """Write a parameter vector as :func:`thermonet.params.save_params` lays it out, atomically
    (docs/formats.md)."""
    import numpy as np

    from thermonet.io.atomic import write_npy, write_text

    theta = np.asarray(theta, dtype=np.float64)
    try:
        if Path(path).suffix.lower() == ".json":
            write_text(path, json.dumps({"x": theta.tolist()}) + "\n")
        else:
            write_npy(path, theta)
    except OSError as err:
        raise output_error(err, path) from None


def _jsonable_config(mini: Any) -> dict[str, Any]:
    import dataclasses

    cfg = getattr(mini, "config", None)
    if not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
        return {}
    return {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in dataclasses.asdict(cfg).items()}
