"""``thermonet calibrate``: the measurement behind the automatic matrix-product backend."""

from __future__ import annotations

import json
import os
import re

import click


@click.command(short_help="Measure (or show) which matrix-product backend is fastest here.")
@click.option("--force", is_flag=True, help="Measure again even if this machine's choice is "
              "cached (and replace the cached one).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def calibrate(force: bool, as_json: bool) -> None:
    """Time the M(3) kernels' matrix products (one 128-row block, one thread) with every
    backend that can run here (NumPy's np.dot, thermonet's own products, and Intel MKL if
    installed), print the rates and the choice, and cache it for this machine (CPU and library
    versions) with the time and the machine's load (1-minute load average) of the measurement.
    A measurement taken on a busy machine is taken again by the next process that finds the
    machine quiet.

    With THERMONET_BLAS unset or `auto`, every thermonet process on this machine uses the
    cached choice; THERMONET_BLAS=numpy, =own or =mkl overrides it. The cache lives in
    THERMONET_CACHE_DIR, else the user cache directory (~/.cache/thermonet on Linux).

    \b
    Example:
        thermonet calibrate --force
    """
    from thermonet.kernels.matmul import backend, calibration

    record = backend.calibrate(force=force)
    want = backend.requested()
    lib, why_not = backend.load_mkl()
    uses = want if want != "auto" else record["backend"]
    path = os.path.join(calibration.cache_dir(), calibration.CACHE_FILE)
    prods = calibration.products("numpy")
    if as_json:
        click.echo(json.dumps({**record, "cache": path, "thermonet_blas": want,
                               "process_backend": uses}, sort_keys=True))
        return
    click.echo(f"matrix products of one {calibration.ROWS}-row block of M(3) "
               f"({len(prods)} products, {calibration.flops(prods) / 1e6:.2f} MFLOP), "
               "1 thread, fastest of "
               f"{record['rates'].get('numpy', next(iter(record['rates'].values())))['rounds']}"
               " interleaved rounds (own: its own rounds in a separate process):")
    click.echo(f"{'backend':<8} {'us/block':>9} {'GFLOP/s':>8}")
    for name, r in sorted(record["rates"].items(), key=lambda kv: kv[1]["us_per_block"]):
        mark = "   <- chosen" if name == record["backend"] else ""
        click.echo(f"{name:<8} {r['us_per_block']:>9.1f} {r['gflops']:>8.1f}{mark}")
    key = record["key"]
    flags = ", ".join(f for f in ("avx2", "avx512f", "fma") if key.get(f)) or "none"
    load = record.get("load")
    click.echo(f"{'measured now' if record['how'] == 'measured' else 'measured earlier'} "
               f"({record['measured_utc']}, {calibration.describe_load(load)}), cached in "
               f"{path}")
    if calibration.busy(load):
        click.echo(f"the machine was busy (over {calibration.BUSY_LOAD:g} runnable processes "
                   "per CPU): the next thermonet process that finds it quiet measures again")
    click.echo(f"machine: {key['cpu_model']} ({key['cpu_name'] or 'cpu'}; {flags}), "
               f"{key['n_cpus']} CPUs; numpy {key['numpy']}, scipy {key['scipy']}, "
               f"numba {key['numba']}" + (f", {_short(key['mkl'])}" if key["mkl"] else ""))
    if lib is None:
        click.echo(f"MKL cannot run here: {why_not}")
    if want != "auto":
        click.echo(f"THERMONET_BLAS={want} overrides the measurement: thermonet uses {uses}")
    else:
        click.echo(f"thermonet uses {uses} (THERMONET_BLAS unset or auto)")


def _short(mkl: str) -> str:
    """``MKL 2026.2-Product`` from MKL's long version string."""
    found = re.search(r"Version (\S+)", mkl)
    return f"MKL {found.group(1)}" if found else mkl
