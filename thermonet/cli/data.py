"""``thermonet data``: fetch MNIST, report what is available, build the embedded file, draw sets,
write the robot arm's large test set."""

from __future__ import annotations

import functools
import pathlib
from collections.abc import Callable
from typing import Any, TypeVar

import click

from thermonet.errors import ThermonetError

F = TypeVar("F", bound=Callable[..., Any])


def _library_errors(func: F) -> F:
    """Turn ThermonetError into a one-line ClickException (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ThermonetError as err:
            raise click.ClickException(str(err)) from None

    return wrapper  # type: ignore[return-value]


_mnist_dir_opt = click.option(
    "--mnist-dir", type=click.Path(file_okay=False, path_type=pathlib.Path), default=None,
    help="Directory of the four MNIST IDX files (default: $THERMONET_MNIST_DIR, then "
         "<data dir>/mnist).")
_data_dir_opt = click.option(
    "--data-dir", type=click.Path(file_okay=False, path_type=pathlib.Path), default=None,
    help="User data directory for generated sets (default: $THERMONET_DATA_DIR, then "
         "~/.local/share/thermonet).")


@click.group(name="data")
def data() -> None:
    """MNIST data: fetch it, see what is available, build the embedded file, draw training sets.

    D50, D500, D5000 and the official test set work offline (embedded). Other sizes, the
    paper's D1000/D50000 and the complement test set need the four MNIST files.
    """


@data.command(short_help="Download the four MNIST files (verified by SHA-256).")
@click.option("--dest", type=click.Path(file_okay=False, path_type=pathlib.Path), default=None,
              help="Target directory (default: $THERMONET_MNIST_DIR, else <data dir>/mnist).")
@click.option("--mirror", "mirrors", multiple=True, metavar="URL",
              help="Base URL to try, in order (repeatable; default: the public mirrors).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=30.0,
              show_default=True, help="Network timeout in seconds.")
@_data_dir_opt
@_library_errors
def fetch(dest: pathlib.Path | None, mirrors: tuple[str, ...], timeout: float,
          data_dir: pathlib.Path | None) -> None:
    """Download the four gzip-compressed MNIST IDX files into DEST.

    Each file is verified by the SHA-256 of its uncompressed contents; a failed or corrupt
    download is discarded and the next mirror is tried. Files already present and intact are
    kept. Nothing partial is ever left under a final file name.
    """
    from thermonet.data import DEFAULT_MIRRORS, fetch_mnist, mnist_dir_path

    target = dest if dest is not None else mnist_dir_path(None, data_dir)[0]
    files = fetch_mnist(target, mirrors=mirrors or DEFAULT_MIRRORS, timeout=timeout)
    for path in files.values():
        click.echo(f"ok  {path}")
    click.echo(f"MNIST is in {target}")
    if dest is not None:
        click.echo(f"use it with: export THERMONET_MNIST_DIR={target}")


@data.command(short_help="Where the data are, whether they are intact, what works offline.")
@_mnist_dir_opt
@_data_dir_opt
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Check the SHA-256 of each MNIST file.")
@_library_errors
def info(mnist_dir: pathlib.Path | None, data_dir: pathlib.Path | None, verify: bool) -> None:
    """Report where the MNIST files were found and whether their checksums are right, which
    data sets are available offline, and where generated training sets are stored."""
    from thermonet.data import data_info

    r = data_info(mnist_dir, data_dir, verify=verify)
    click.echo(f"MNIST directory:   {r['mnist_dir']} ({r['mnist_dir_source']})")
    for f in r["mnist_files"]:
        click.echo(f"  {f['status']:<18} {f['path'] or f['file'] + '[.gz]'}")
        if f.get("detail"):
            click.echo(f"  {'':<18} {f['detail']}")
    click.echo(f"full MNIST:        {'available' if r['mnist_available'] else 'not available'}")
    emb = r["embedded"]
    if emb["status"] == "ok":
        click.echo(f"embedded file:     {emb['path']} ({emb['bytes']:,} bytes, Pillow "
                   f"{emb['pillow_version']})")
    else:
        click.echo(f"embedded file:     ERROR {emb['detail']}")
    click.echo(f"data directory:    {r['data_dir']} ({r['data_dir_source']})")
    click.echo(f"generated sets:    {r['subsets_dir']}")
    for s in r["stored_subsets"]:
        detail = s.get("error") or f"n={s['n']} seed={s['seed']} created {s['created_utc']}"
        click.echo(f"  {s['name']:<8} {detail}")
    click.echo(f"available offline: {', '.join(r['available_offline']) or 'nothing'}")
    if r["needs_full_mnist"]:
        click.echo(f"need full MNIST:   {', '.join(r['needs_full_mnist'])} "
                   f"(run `thermonet data fetch`)")
    click.echo(f"default test set:  {r['default_test_set']}")


@data.command("build-embedded", short_help="Rebuild the embedded data file from real MNIST.")
@_mnist_dir_opt
@click.option("--out", type=click.Path(dir_okay=False, path_type=pathlib.Path), default=None,
              help="Output file (default: the package's embedded/mnist16.h5).")
@_library_errors
def build_embedded_cmd(mnist_dir: pathlib.Path | None, out: pathlib.Path | None) -> None:
    """Build the embedded file (D50, D500, D5000 and the official test set as Pillow-resized
    uint8 16x16 images, with labels, indices and provenance) from the four MNIST files."""
    from thermonet.data import EMBEDDED_PATH, build_embedded
    from thermonet.io.outputs import check_output

    if out is not None:
        check_output(out)
    path = build_embedded(mnist_dir, out if out is not None else EMBEDDED_PATH)
    click.echo(f"wrote {path} ({path.stat().st_size:,} bytes)")


@data.command("make-subset", short_help="Draw a stratified training set D<n> and store it.")
@click.argument("name")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the draw.")
@_mnist_dir_opt
@_data_dir_opt
@_library_errors
def make_subset_cmd(name: str, seed: int, mnist_dir: pathlib.Path | None,
                    data_dir: pathlib.Path | None) -> None:
    """Draw the stratified training set NAME (D<n>, n divisible by 10: n/10 images per class)
    from SEED and store it, so that every later use of NAME gets exactly these images.

    Example: thermonet data make-subset D200 --seed 1
    """
    import numpy as np

    from thermonet.data import load_dataset, make_subset

    path, created = make_subset(name, seed=seed, mnist_dir=mnist_dir, data_dir=data_dir)
    ds = load_dataset(name, seed=seed, mnist_dir=mnist_dir, data_dir=data_dir)
    counts = ", ".join(str(int(c)) for c in np.bincount(ds.y, minlength=10))
    state = "stored" if created else "already stored (unchanged)"
    click.echo(f"{ds.name}: {len(ds)} images, seed {seed}, {state} in {path}")
    click.echo(f"per class: {counts}")


@data.command("robot-arm-test", short_help="Write the robot arm's 10,000-case test set (CSV).")
@click.argument("out", metavar="FILE.csv", type=click.Path(dir_okay=False,
                                                            path_type=pathlib.Path))
@_library_errors
def robot_arm_test_cmd(out: pathlib.Path) -> None:
    """Write 10,000 robot-arm test cases drawn from thermonet's generator (seed 19930; the
    200-case set's generator and noise): columns x1, x2 (inputs), y1, y2 (noisy targets) and
    f1, f2 (noise-free targets). Neal's own test set is not published; this is the sharper
    test of a robot-arm run than its 200 test cases (docs/regression.md).

    Example: thermonet data robot-arm-test robot_arm_test10k.csv
    """
    from thermonet.data import write_robot_arm_large_test

    if out.suffix.lower() != ".csv":
        raise click.ClickException(f"{out}: expected a .csv file name (the set is written as "
                                   "CSV), e.g. robot_arm_test10k.csv")
    path = write_robot_arm_large_test(out)
    click.echo(f"wrote {path}: 10,000 cases, columns x1, x2, y1, y2, f1, f2 "
               f"({path.stat().st_size:,} bytes)")
