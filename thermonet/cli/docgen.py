"""The CLI reference (docs/cli.md), generated from the Click help texts.

``python scripts/gen_cli_docs.py`` rewrites docs/cli.md; the test suite checks that the
committed file equals what this module renders, so the reference never drifts from the code.
"""

from __future__ import annotations

from typing import Any

import click

HEADER = """# Command-line reference

Generated from the commands' own `--help` texts by `python scripts/gen_cli_docs.py`
(do not edit by hand; the test suite fails when this page and the code disagree).
Every command accepts `-h/--help`. Library errors are one line on stderr with exit code 1;
`thermonet --debug COMMAND ...` shows the traceback instead.
"""


def _context(cmd: click.Command, name: str, parent: click.Context | None) -> click.Context:
    """The context the real command line would build (help names inherited from the root)."""
    if parent is None:
        return click.Context(cmd, info_name=name, terminal_width=100, max_content_width=100,
                             help_option_names=["-h", "--help"])
    return click.Context(cmd, info_name=name, parent=parent)


def _walk(cmd: click.Command, path: list[str], out: list[str], level: int,
          parent: click.Context | None = None) -> None:
    ctx = _context(cmd, path[-1], parent)
    if getattr(cmd, "_help_option", None) is not None:
        # Click (>= 8.1.8) caches the help option with the names of the first context that
        # asked for it; rebuild it from this context so the page never depends on what ran
        # earlier in the process
        cmd._help_option = None
    title = " ".join(path)
    out.append(f"{'#' * level} `{title}`\n")
    out.append("```text\n" + cmd.get_help(ctx).rstrip() + "\n```\n")
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                _walk(sub, [*path, name], out, min(level + 1, 4), ctx)


def render() -> str:
    """The whole reference as Markdown."""
    from thermonet.cli import main

    out = [HEADER]
    _walk(main, ["thermonet"], out, 2)
    return "\n".join(out)


# -- the config reference (docs/config.md) ------------------------------------------------------

CONFIG_HEADER = """# Config reference

Generated from the validation schema and the plugins' own settings by
`python scripts/gen_cli_docs.py` (do not edit by hand; the test suite fails when this page and
the code disagree). A run config (`thermonet run CONFIG.toml`) has the sections below; unknown
keys are errors with a did-you-mean suggestion, and types and ranges are checked before any work
starts. The resolved config in a run directory (`DIR/config.toml`) lists every value with where
it came from (`default`, `config`, `set` for `--set`, `commandline`). How runs use these
settings: [runs.md](runs.md); the samplers: [samplers.md](samplers.md); the minimisers:
[minimisers.md](minimisers.md). The configs of the other commands have their own key-by-key
references, checked against the code by the tests: `thermonet evidence` in
[evidence.md](evidence.md), `thermonet anneal` in [annealing.md](annealing.md), and the
`[baseline]` table of `thermonet baseline --config` in [minimisers.md](minimisers.md).
"""

_SECTION_TEXT = {
    "run": "The run's schedule, seed and parallelism.",
    "data": "The training set and the test set.",
    "prior": "An optional Gaussian prior on top of the always-on box prior "
             "`|w_i| < sigma_i/2` (whose scale is `architecture.prior_scale`).",
    "init": "How each replica's starting point is made.",
    "sampler": "Keys of `[sampler]` handled by the runner for every sampler.",
    "ladder": "The temperature ladder of the tempering engine (replica exchange, paper Alg. 2): "
              "slot k runs the `[sampler]` at temperature `T_k`. The ladder is geometric "
              "(`n_temperatures`, `t_min`, `t_max`) unless `temperatures` lists it; the default "
              "is a single chain at T = 1 (one rung, no swaps). Configurations written with "
              "`[sampler] name = \"rehmc\"` and `[sampler.inner]` (or a single chain's "
              "`[sampler] temperature`) are still read, with a deprecation warning that shows "
              "this form.",
}


def _fmt(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
        return f"`{value:g}`"
    if isinstance(value, (list, tuple)):
        return "`[" + ", ".join(str(v) for v in value) + "]`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _doc_fields(*objs: Any) -> dict[str, str]:
    """``name : type`` entries of numpy-style docstrings -> their first sentence."""
    import inspect

    out: dict[str, str] = {}
    for obj in objs:
        doc = inspect.getdoc(obj) or ""
        lines = doc.splitlines()
        for i, line in enumerate(lines):
            s = line.strip()
            if " : " not in s and not s.endswith(" :"):
                continue
            s = s if " : " in s else s[:-2] + " : "
            names = [n.strip() for n in s.split(" : ", 1)[0].split(",")]
            if not all(n.isidentifier() for n in names) or line.startswith(" "):
                continue
            text = []
            for nxt in lines[i + 1:]:
                if nxt.strip() == "" or not nxt.startswith(" "):
                    break
                text.append(nxt.strip())
            for name in names:
                if text and name not in out:
                    out[name] = " ".join(text)
    return out


#: meanings of settings whose classes document them only in prose
_FALLBACK = {
    "prior_scale": "c of the box prior sigma_i = c/sqrt(k_i); unset: the architecture's "
                   "default (100 for linear outputs and the test systems' own, 2000 for M3*)",
    "n": "number of parameters (dimensions)",
    "height": "barrier height h of each well",
    "stiffness": "spring constant(s) k_i",
    "centre": "centre(s) mu_i",
    "means": "component means, one sequence per component",
    "widths": "component standard deviations s_j",
    "weights": "component weights pi_j (unset: equal)",
}


def _schema_table(schema: dict[str, Any]) -> str:
    from thermonet.config import type_name

    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, (default, types, check, help_) in schema.items():
        allowed = check[1] if check else type_name(types)
        rows.append(f"| `{key}` | {_cell(allowed)} | {_fmt(default)} | {_cell(help_)} |")
    return "\n".join(rows) + "\n"


def _plugin_table(cls: type[Any]) -> str:
    import dataclasses

    from thermonet.config import REQUIRED, plugin_defaults

    defaults = plugin_defaults(cls)
    config_cls = getattr(cls, "Config", None)
    if config_cls is not None and dataclasses.is_dataclass(config_cls):
        types = {f.name: str(f.type) for f in dataclasses.fields(config_cls)}
        # a Config that extends another (hmc-gibbs's) documents only its own fields
        bases = [c for c in getattr(config_cls, "__mro__", ()) if c is not object]
        docs = _doc_fields(*bases, cls)
    else:
        import inspect
        sig = inspect.signature(cls.__init__)
        types = {n: (p.annotation if isinstance(p.annotation, str) else
                     getattr(p.annotation, "__name__", str(p.annotation)))
                 for n, p in sig.parameters.items() if p.annotation is not p.empty}
        docs = {**_FALLBACK, **_doc_fields(cls, cls.__init__)}
    if not defaults:
        return "No settings.\n"
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, default in defaults.items():
        d = "required" if default is REQUIRED else _fmt(default)
        rows.append(f"| `{key}` | `{_cell(types.get(key, 'Any'))}` | {d} | "
                    f"{_cell(docs.get(key, ''))} |")
    return "\n".join(rows) + "\n"


def render_config() -> str:
    """The config reference as Markdown: the runner's sections and every built-in plugin."""
    from thermonet import config as cfg
    from thermonet import registry
    from thermonet.errors import ThermonetError

    out = [CONFIG_HEADER]
    for section, schema in (("run", cfg.RUN_KEYS), ("data", cfg.DATA_KEYS),
                            ("prior", cfg.PRIOR_KEYS), ("init", cfg.INIT_KEYS),
                            ("ladder", cfg.LADDER_KEYS)):
        out.append(f"## `[{section}]`\n\n{_SECTION_TEXT[section]}\n\n{_schema_table(schema)}")
    out.append("## `[architecture]`, `[minimiser]`, `[sampler]`\n\n"
               "Each names a registered plugin (`name = ...`; defaults: "
               + ", ".join(f"{k} `{v}`" for k, v in cfg.DEFAULT_NAMES.items())
               + ") and takes that plugin's own settings, listed below for the built-in ones "
               "(`thermonet plugins` lists what is installed). `[sampler]` names the sampler "
               "run at every temperature of the `[ladder]`.\n\n"
               f"{_SECTION_TEXT['sampler']}\n\n{_schema_table(cfg.SAMPLER_RUNNER_KEYS)}")
    titles = {"architecture": "Architectures", "minimiser": "Minimisers",
              "sampler": "Samplers"}
    for role, title in titles.items():
        out.append(f"## {title} (`[{role}]`)\n")
        for name, spec in registry.available(role).items():
            if spec.distribution != "thermonet":
                continue
            try:
                cls = registry.load(role, name)
            except ThermonetError:  # an entry point left in stale installed metadata
                continue
            summary = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
            out.append(f"### `name = \"{name}\"`\n\n{summary} (`{spec.value}`)\n\n"
                       f"{_plugin_table(cls)}")
    return "\n".join(out)
