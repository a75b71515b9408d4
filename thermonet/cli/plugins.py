"""``thermonet plugins``: every registered plugin, its distribution and version."""

from __future__ import annotations

import json

import click


@click.command(short_help="List registered samplers, minimisers, integrators, architectures.")
@click.option("--role", type=click.Choice(["sampler", "minimiser", "integrator",
                                           "architecture"]), default=None,
              help="Only this role.")
@click.option("--check", "mode", flag_value="conformance",
              help="Also run each plugin through the conformance kit (thermonet.testing): "
                   "analytic targets, a few seconds per plugin.")
@click.option("--no-check", "mode", flag_value="metadata",
              help="Read entry-point metadata only: import no plugin.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def plugins(role: str | None, mode: str | None, as_json: bool) -> None:
    """List every registered plugin with the distribution that provides it.

    By default each plugin is imported and checked against its role's static contract (base
    class, api_version, Config/State/Info classes). Broken plugins (failing to import,
    violating their contract, failing the conformance kit with --check, or claimed by two
    distributions) are listed with the reason; they do not affect other plugins. The exit
    status is 1 when --check finds a broken plugin.
    """
    from thermonet import registry

    mode = mode or "import"
    roles = [role] if role else list(registry.ROLES)
    out: dict[str, list[dict[str, object]]] = {}
    any_broken = False
    for r in roles:
        status = registry.check_all(r) if mode != "metadata" else {}
        if mode == "conformance":
            status = _conformance(r, status)
        clashes = registry.conflicts(r)
        rows = []
        for name, spec in registry.available(r).items():
            row = spec.as_dict()
            problem = status.get(name)
            if name in clashes and problem is None:
                problem = "claimed by " + " and ".join(
                    f"{s.distribution} ({s.value})" for s in clashes[name])
            row["status"] = "ok" if problem is None else "broken"
            any_broken = any_broken or problem is not None
            row["problem"] = problem
            row["result"] = (f"broken: {problem}" if problem is not None
                             else RESULTS[mode])
            rows.append(row)
        out[r] = rows
    if as_json:
        click.echo(json.dumps(out, sort_keys=True))
        return
    for r, rows in out.items():
        click.echo(f"{r}s ({registry.ROLES[r]}):")
        if not rows:
            click.echo("  (none)")
        for row in rows:
            dist = f"{row['distribution']} {row['version']}" if row["distribution"] else "?"
            line = f"  {row['name']:<16} {dist:<22} {row['value']}"
            if row["status"] != "ok":
                line += f"\n      BROKEN: {row['problem']}"
            elif mode == "conformance":
                line += f"\n      {row['result']}"
            click.echo(line)
    if mode == "conformance":
        rows = [row for rs in out.values() for row in rs]
        n_bad = sum(row["status"] != "ok" for row in rows)
        click.echo(f"{len(rows)} plugins checked: {len(rows) - n_bad} passed, {n_bad} broken")
        if any_broken:
            raise SystemExit(1)


#: a working plugin's result, per mode
RESULTS = {"metadata": "listed (not imported)", "import": "loaded; contract checked",
           "conformance": "loaded; conformance checks passed"}


def _conformance(role: str, status: dict[str, str | None]) -> dict[str, str | None]:
    """``status`` with each loadable plugin's conformance-kit verdict added."""
    from thermonet import registry, testing

    out = dict(status)
    for name, problem in status.items():
        if problem is not None:
            continue
        try:
            testing.check(role, registry.load(role, name))
        except testing.ConformanceError as err:
            out[name] = f"conformance: {err}"
        except Exception as err:
            out[name] = f"conformance: {type(err).__name__}: {err}"
    return out
