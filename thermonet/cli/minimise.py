"""``thermonet minimise`` and ``thermonet baseline``: minimisation and the paper's
standard-optimisation baseline (Sec. 3.4)."""

from __future__ import annotations

import inspect
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import click

from thermonet.cli.options import in_range
from thermonet.ranges import ANY_NUMBER, COUNT, NON_NEGATIVE_INT, POSITIVE

_TEST_CHOICE = click.Choice(["auto", "complement", "official"])


def _quiet(ctx: click.Context) -> bool:
    root = ctx.find_root()
    return bool(root.obj and root.obj.get("quiet"))


def _fmt(v: float) -> str:
    return "nan" if math.isnan(v) else f"{v:.6g}"


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "--:--:--"
    return time.strftime("%H:%M:%S", time.gmtime(max(seconds, 0.0)))


class ProgressLine:
    """Progress on stderr: a rewritten line on a terminal, a line every ``interval`` seconds
    otherwise, nothing when quiet."""

    def __init__(self, quiet: bool, interval: float = 10.0, stream: Any = None) -> None:
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval
        self.t0 = time.monotonic()
        self.last = self.t0
        self.shown = False

    def show(self, msg: str, final: bool = False) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if self.tty:
            if final or now - self.last >= 0.2:
                self.last = now
                self.stream.write(f"\r{msg}\x1b[K")
                self.stream.flush()
                self.shown = True
        elif final or now - self.last >= self.interval:
            self.last = now
            click.echo(msg, err=True)

    def close(self) -> None:
        if self.tty and self.shown and not self.quiet:
            self.stream.write("\n")
            self.stream.flush()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


def _settings(items: tuple[str, ...], kind: str) -> dict[str, Any]:
    """``--set key=value`` (or ``minimiser.key=value``); values are TOML scalars, bare words
    strings."""
    from thermonet.config import parse_set
    from thermonet.errors import ConfigError

    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if key.startswith("minimiser."):
            key = key[len("minimiser."):]
        if not sep or not key or "." in key:
            raise ConfigError(f"--set {item!r}: expected key=value with a setting of the "
                              f"{kind} minimiser, e.g. --set max_steps=5000")
        out.update({k.partition(".")[2]: v for k, v in parse_set([f"m.{key}={raw}"]).items()})
    return out


def _build_minimiser(name: str, sets: tuple[str, ...]) -> Any:
    from thermonet import registry

    cls = registry.load("minimiser", name)
    return cls(**_settings(sets, name))


def _accepts_callback(minimiser: Any) -> bool:
    try:
        return "callback" in inspect.signature(minimiser.minimise).parameters
    except (TypeError, ValueError):
        return False


_COMMON = [
    click.option("--arch", "arch_name", required=True, help="Architecture (M1, M3, M3*, ...)."),
    click.option("--data", "data_name", required=True,
                 help="Training set (D50, D500, D5000, D<n>)."),
    click.option("--minimiser", "minimiser_name", default="rmin", show_default=True,
                 help="Registered minimiser: rmin (the paper's Alg. 3) or fire."),
    click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                 help="A minimiser setting, e.g. --set max_steps=5000 (repeatable)."),
    click.option("--test", "test_kind", type=_TEST_CHOICE, default="auto", show_default=True,
                 help="Test set: every MNIST image not in the training set, or the official "
                      "10k."),
    click.option("--prior-scale", type=float, callback=in_range(POSITIVE), default=None,
                 help="c of the box sigma_i = c/sqrt(k_i) [default: the architecture's]."),
    click.option("--mnist-dir", type=click.Path(file_okay=False), default=None,
                 envvar="THERMONET_MNIST_DIR", help="Directory of the MNIST IDX files."),
    click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout."),
]


def _common(f: Any) -> Any:
    for opt in reversed(_COMMON):
        f = opt(f)
    return f


@click.command(short_help="Minimise E(D|w) from a standard initial draw (RMin or FIRE).")
@_common
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
    import numpy as np

    from thermonet.data import load_data
    from thermonet.errors import ConfigError
    from thermonet.evaluation import evaluate
    from thermonet.params import load_params
    from thermonet.priors import BoxPrior
    from thermonet.registry import get_architecture

    _check_params_out(out_path)    # before the minimisation, which may take hours
    if draw_index < 0:
        raise ConfigError(f"--draw {draw_index}; expected a draw number >= 0")
    if seed < 0:
        raise ConfigError(f"--seed {seed}; expected a non-negative integer")
    arch = get_architecture(arch_name)
    mini = _build_minimiser(minimiser_name, sets)
    if init_path is not None:
        theta0 = load_params(init_path, arch.n_params, index=index)
        start = str(init_path)
    else:
        child = np.random.SeedSequence(seed).spawn(draw_index + 1)[draw_index]
        theta0 = arch.initial_draw(np.random.default_rng(child))
        start = f"standard initialisation, seed {seed}, draw {draw_index}"
    split = load_data(data_name, test=test_kind, mnist_dir=mnist_dir)
    prior = BoxPrior.for_architecture(arch, prior_scale)
    potential = arch.potential(split.train)

    line = ProgressLine(_quiet(ctx))
    budget = getattr(getattr(mini, "config", None), "max_steps", None)

    def callback(step: int, energy: float, g_max: float, dt: float) -> None:
        rate = step / max(line.elapsed(), 1e-9)
        of = f"/{budget}" if budget else ""
        line.show(f"{mini.name}: step {step}{of}  E {energy:.6g}  max|dE/dw| {g_max:.3g}  "
                  f"dt {dt:.3g}  {rate:.0f} steps/s")

    kwargs = {"callback": callback} if _accepts_callback(mini) else {}
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
    click.echo(f"minimiser      {mini.name} ({start})")
    click.echo(f"stopped        {result.reason} after {result.n_steps} steps "
               f"({result.n_grad_evals} gradients, {seconds:.2f} s)")
    click.echo(f"train energy   {_fmt(result.energy)}  "
               f"({_fmt(ev['train_energy_per_point'])} per point, {ev['train_set']})")
    click.echo(f"max |dE/dw|    {_fmt(result.max_abs_grad)}")
    click.echo(f"test energy    {_fmt(ev['test_energy'])}  "
               f"({_fmt(ev['test_energy_per_point'])} per point, {ev['test_set']}, "
               f"{ev['test_kind']})")
    click.echo(f"train error    {100 * ev['train_error']:.2f}%")
    click.echo(f"test error     {100 * ev['test_error']:.2f}%")
    box = "yes" if ev["in_prior_box"] else f"no ({ev['n_outside_prior_box']} outside)"
    click.echo(f"in prior box   {box}")
    click.echo(f"saved          {out_path}")
    if result.reason == "step budget" and not _quiet(ctx):
        click.echo("hint: the step budget ran out; raise it with --set max_steps=N "
                   "(M3 on D500 needs ~1e4 steps)", err=True)


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
        raise _output_error(err, path) from None


def _output_error(err: OSError, path: Any) -> Any:
    """One line for a failed write of a result: nothing partial is left, and the computation
    repeats exactly from the same command (its seed fixes it)."""
    import errno

    from thermonet.errors import ThermonetError

    what = {errno.ENOSPC: "disk full", errno.EFBIG: "file-size limit (ulimit -f) reached"}.get(
        err.errno or 0, f"cannot write ({err.strerror or err})")
    return ThermonetError(f"{what} while writing {path}; no partial file was left, and the same "
                          "command with the same seed repeats the result exactly: free space "
                          "(or choose another --out) and run it again")


def _jsonable_config(mini: Any) -> dict[str, Any]:
    import dataclasses

    cfg = getattr(mini, "config", None)
    if not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
        return {}
    return {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in dataclasses.asdict(cfg).items()}


#: keys of a [baseline] table in a config file -> option destinations of `thermonet baseline`
BASELINE_KEYS = {"arch": "arch_name", "data": "data_name", "minimiser": "minimiser_name",
                 "set": "sets", "test": "test_kind", "prior_scale": "prior_scale",
                 "draws": "n_draws", "keep": "n_keep", "threshold": "energy_threshold",
                 "workers": "workers", "executor": "executor", "seed": "seed"}


def _load_baseline_config(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """Eager --config: the file's [baseline] table becomes the defaults of the options, so
    command-line options still win."""
    if value is None:
        return
    import difflib

    from thermonet.config import read_toml
    from thermonet.errors import ConfigError

    try:
        doc = read_toml(value)
        table = doc.get("baseline")
        if not isinstance(table, dict):
            raise ConfigError(f"{value} has no [baseline] table; expected keys "
                              f"{', '.join(BASELINE_KEYS)}")
        defaults: dict[str, object] = {}
        for key, v in table.items():
            if key not in BASELINE_KEYS:
                close = difflib.get_close_matches(key, list(BASELINE_KEYS), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"unknown key {key!r} in [baseline] of {value}{hint} Valid "
                                  f"keys: {', '.join(BASELINE_KEYS)}")
            if key == "set" and isinstance(v, dict):
                v = [f"{k}={val}" for k, val in v.items()]
            defaults[BASELINE_KEYS[key]] = v
    except ConfigError as err:
        raise click.BadParameter(str(err), ctx=ctx, param=param) from None
    ctx.default_map = {**(ctx.default_map or {}), **defaults}


@click.command(short_help="The paper's standard-optimisation baseline (Sec. 3.4).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              is_eager=True, expose_value=False, callback=_load_baseline_config,
              help="A TOML file whose [baseline] table gives the options (e.g. "
                   "sample_runs/baseline_M3_D500.toml); options given here override it.")
@_common
@click.option("--draws", "n_draws", type=int, callback=in_range(COUNT), required=True,
              help="Number of standard initial draws, each minimised once.")
@click.option("--keep", "n_keep", type=int, callback=in_range(COUNT), default=None,
              help="Keep at most N minima: the first N with E < threshold if --threshold is "
                   "given, else the N lowest-energy ones.")
@click.option("--threshold", "energy_threshold", type=float, callback=in_range(ANY_NUMBER),
              default=None,
              help="'E(D|w) = 0' means E below this, in nats over the training set "
                   "[default: 1e-3].")
@click.option("--workers", type=int, callback=in_range(COUNT), default=1, show_default=True,
              help="Threads (in each rank under MPI; the result does not depend on it).")
@click.option("--executor", type=click.Choice(["auto", "threads", "mpi"]), default="auto",
              show_default=True, help="Where the minimisations run (any choice gives the same "
              "result): auto is MPI under mpiexec or srun (blocks of draws per rank), else "
              "threads.")
@click.option("--seed", type=int, callback=in_range(NON_NEGATIVE_INT), default=0, show_default=True,
              help="Root seed; draw i uses SeedSequence(seed).spawn(draws)[i].")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="Save the kept minima as a (n_kept, n_params) .npy array (checked to be "
                   "writable before any work).")
@click.pass_context
def baseline(ctx: click.Context, arch_name: str, data_name: str, minimiser_name: str,
             sets: tuple[str, ...], test_kind: str, prior_scale: float | None,
             mnist_dir: str | None, as_json: bool, n_draws: int, n_keep: int | None,
             energy_threshold: float | None, workers: int, executor: str, seed: int,
             out_path: str | None) -> None:
    """Standard optimisation: minimise from many standard initial draws and report the mean
    test energy per point and test error of the minima with E(D|w) = 0.

    Each draw w_i ~ U(-1/sqrt(k_i), 1/sqrt(k_i)) is minimised with the paper's Alg. 3 (RMin,
    here with max_steps=50000 and grad_tol=1e-5 unless --set says otherwise). By default the
    minima with E(D|w) < 1e-3 are kept (the float64 stand-in for the paper's float32 E = 0);
    --keep N keeps the N lowest instead (the paper's D5000 procedure: 4000 draws, best 100).

    \b
    Examples:
        thermonet baseline --arch M3 --data D50 --draws 100 --workers 2
        thermonet baseline --arch M3 --data D500 --draws 100 --keep 100 --threshold 1e-3
        thermonet baseline --arch M3 --data D5000 --draws 4000 --keep 100 --workers 2
            --minimiser fire --set step_size=0.0015 --set dt_max=0.015   (one line)
        mpiexec -n 8 thermonet baseline --config sample_runs/baseline_M3_D500.toml

    Under MPI each rank minimises a contiguous block of the draws; rank 0 alone prints and
    writes --out, and the result is bitwise the one-process result.
    """
    import numpy as np

    from thermonet import parallel
    from thermonet.baseline import BASELINE_RMIN_SETTINGS, standard_optimisation
    from thermonet.data import load_data
    from thermonet.io.atomic import write_npy
    from thermonet.io.outputs import check_output
    from thermonet.registry import get_architecture

    job = parallel.world(executor)
    parallel.require_same_backend(job)
    if out_path is not None:
        # numpy.save's naming, kept: "--out minima" writes minima.npy
        if not out_path.endswith(".npy"):
            out_path += ".npy"
        checked = out_path
        job.on_root(lambda: check_output(checked))   # before the minimisations (hours)
    arch = (get_architecture(arch_name) if prior_scale is None
            else get_architecture(arch_name, prior_scale=prior_scale))
    settings = _settings(sets, minimiser_name)
    if minimiser_name == "rmin":
        settings = {**BASELINE_RMIN_SETTINGS, **settings}
    from thermonet import registry

    mini = registry.load("minimiser", minimiser_name)(**settings)
    split = load_data(data_name, test=test_kind, mnist_dir=mnist_dir)

    line = ProgressLine(_quiet(ctx) or not job.is_root)
    share = f" (rank 0's block of {n_draws}, {job.size} ranks)" if job.size > 1 else ""

    def progress(done: int, total: int) -> None:
        el = line.elapsed()
        eta = el / done * (total - done) if done else math.inf
        line.show(f"baseline: {done}/{total} minimisations{share}  elapsed {_clock(el)}  "
                  f"ETA {_clock(eta)}", final=done == total)

    res = standard_optimisation(arch, split, n_draws=n_draws, n_keep=n_keep,
                                energy_threshold=energy_threshold, minimiser=mini, seed=seed,
                                workers=workers, progress=progress,
                                keep_params=out_path is not None, world=job)
    line.close()
    if out_path is not None:
        assert res.params is not None  # kept: keep_params=True
        params, target = res.params, out_path

        def save() -> None:
            try:
                write_npy(target, params)
            except OSError as err:
                raise _output_error(err, target) from None

        job.on_root(save)
    if not job.is_root:
        return
    summary = res.summary()
    summary["seconds"] = line.elapsed()
    if out_path is not None:
        summary["out"] = str(out_path)
    if as_json:
        click.echo(json.dumps(summary, sort_keys=True))
        return
    s = summary
    if res.energy_threshold is None:
        rule = f"the {res.n_keep} lowest E(D|w)"
    else:
        rule = f"E(D|w) < {res.energy_threshold:g}" + (
            f", first {res.n_keep}" if res.n_keep else "")
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(s["reasons"].items()))
    steps = res.n_steps
    click.echo(f"architecture   {arch.name}, minimiser {res.minimiser}")
    click.echo(f"data           {res.train_set} ({res.n_train}), test {res.test_set} "
               f"({res.n_test}, {res.test_kind})")
    click.echo(f"draws          {res.n_draws} (seed {res.seed}); stopped by {reasons}")
    click.echo(f"steps          median {int(np.median(steps))}, max {int(steps.max())}")
    click.echo(f"kept           {res.n_kept} ({rule})")
    if res.n_kept:
        click.echo(f"test energy    {_fmt(res.test_energy_mean)} +- {_fmt(res.test_energy_sem)}"
                   " per point (mean +- standard error)")
        click.echo(f"test error     {100 * res.test_error_mean:.2f}% +- "
                   f"{100 * res.test_error_sem:.2f}%")
    else:
        click.echo("test energy    n/a (no minimum kept: raise --draws or --set max_steps)")
    if out_path is not None:
        click.echo(f"saved          {out_path} ({res.n_kept} minima)")
