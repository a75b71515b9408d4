"""What ``thermonet minimise`` and ``thermonet baseline`` share: the options that choose the
network, the data and the minimiser, the minimiser's ``--set`` settings, and the one-line error
of a result that could not be written."""

from __future__ import annotations

import math
from typing import Any

import click

from thermonet.cli.options import in_range
from thermonet.ranges import POSITIVE

TEST_CHOICE = click.Choice(["auto", "complement", "official"])


def fmt(v: float) -> str:
    """A number in six significant digits (``nan`` as such)."""
    return "nan" if math.isnan(v) else f"{v:.6g}"


def minimiser_settings(items: tuple[str, ...], kind: str) -> dict[str, Any]:
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


def build_minimiser(name: str, sets: tuple[str, ...]) -> Any:
    """The registered minimiser ``name`` with the settings of ``--set``."""
    from thermonet import registry

    cls = registry.load("minimiser", name)
    return cls(**minimiser_settings(sets, name))


COMMON = [
    click.option("--arch", "arch_name", required=True, help="Architecture (M1, M3, M3*, ...)."),
    click.option("--data", "data_name", required=True,
                 help="Training set (D50, D500, D5000, D<n>)."),
    click.option("--minimiser", "minimiser_name", default="rmin", show_default=True,
                 help="Registered minimiser: rmin (the paper's Alg. 3) or fire."),
    click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                 help="A minimiser setting, e.g. --set max_steps=5000 (repeatable)."),
    click.option("--test", "test_kind", type=TEST_CHOICE, default="auto", show_default=True,
                 help="Test set: every MNIST image not in the training set, or the official "
                      "10k."),
    click.option("--prior-scale", type=float, callback=in_range(POSITIVE), default=None,
                 help="c of the box sigma_i = c/sqrt(k_i) [default: the architecture's]."),
    click.option("--mnist-dir", type=click.Path(file_okay=False), default=None,
                 envvar="THERMONET_MNIST_DIR", help="Directory of the MNIST IDX files."),
    click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout."),
]


def common_options(f: Any) -> Any:
    """The options of :data:`COMMON` on a command."""
    for opt in reversed(COMMON):
        f = opt(f)
    return f


def output_error(err: OSError, path: Any) -> Any:
    """One line for a failed write of a result: nothing partial is left, and the computation
    repeats exactly from the same command (its seed fixes it)."""
    import errno

    from thermonet.errors import ThermonetError

    what = {errno.ENOSPC: "disk full", errno.EFBIG: "file-size limit (ulimit -f) reached"}.get(
        err.errno or 0, f"cannot write ({err.strerror or err})")
    return ThermonetError(f"{what} while writing {path}; no partial file was left, and the same "
                          "command with the same seed repeats the result exactly: free space "
                          "(or choose another --out) and run it again")


__all__ = ["COMMON", "TEST_CHOICE", "build_minimiser", "common_options", "fmt",
           "minimiser_settings", "output_error"]
