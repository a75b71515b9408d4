"""``thermonet plugins``: every registered plugin, its distribution and version."""

from __future__ import annotations

import json

import click


@click.command(short_help="List registered samplers, minimisers, integrators, architectures.")
@click.option("--role", type=click.Choice(["sampler", "minimiser", "integrator",
                                           "architecture"]), default=None,
              help="Only this role.")
@click.option("--check/--no-check", default=True, show_default=True,
              help="Import each plugin to report broken ones (--no-check reads metadata only).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def plugins(role: str | None, check: bool, as_json: bool) -> None:
    """List every registered plugin with the distribution that provides it.

    Broken plugins (failing to import, violating their role's contract, or claimed by two
    distributions) are listed with the reason; they do not affect other plugins.
    """
    from thermonet import registry

    roles = [role] if role else list(registry.ROLES)
    out: dict[str, list[dict[str, object]]] = {}
    for r in roles:
        status = registry.check_all(r) if check else {}
        clashes = registry.conflicts(r)
        rows = []
        for name, spec in registry.available(r).items():
            row = spec.as_dict()
            problem = status.get(name)
            if name in clashes and problem is None:
                problem = "claimed by " + " and ".join(
                    f"{s.distribution} ({s.value})" for s in clashes[name])
            row["status"] = "ok" if problem is None else "broken"
            row["problem"] = problem
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
            click.echo(line)
