"""Whether two runs share one configuration: :func:`config_difference`, the first key they
differ in, keys that independent runs may differ in aside (``compare`` and ``export`` pool
only runs of one configuration)."""

from __future__ import annotations

from typing import Any

#: keys that independent runs of one configuration may differ in (the seed is the point; the
#: others change the length or the speed of a run, not the chain it samples)
FREE_KEYS = frozenset({"run.seed", "run.n_iterations", "run.workers", "run.executor",
                       "run.checkpoint_every", "run.min_restarts", "run.min_ess"})

#: sections that set only where a run starts (a prior draw, a minimum of it, a file): runs
#: started differently are the strongest test of mixing, so they may differ in anything here
FREE_SECTIONS = ("init.", "minimiser.")

def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _defaults() -> dict[str, Any]:
    """Every runner key's default, dotted: a run resolved by an older thermonet lacks the
    keys added since, which mean their defaults."""
    from thermonet.config.data import DATA_KEYS
    from thermonet.config.run import (
        INIT_KEYS,
        LADDER_KEYS,
        PRIOR_KEYS,
        RUN_KEYS,
        SAMPLER_RUNNER_KEYS,
    )

    tables = {"run": RUN_KEYS, "prior": PRIOR_KEYS, "init": INIT_KEYS,
              "sampler": SAMPLER_RUNNER_KEYS, "ladder": LADDER_KEYS, "data": DATA_KEYS}
    return {f"{section}.{key}": spec[0] for section, keys in tables.items()
            for key, spec in keys.items()}


def config_difference(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """The first configuration key (dotted) whose value differs, with both values (a key
    one run lacks counts as its default)."""
    fa, fb = _flatten(a), _flatten(b)
    default = _defaults()
    for key in sorted(set(fa) | set(fb)):
        if key in FREE_KEYS or key.startswith(FREE_SECTIONS):
            continue
        va = fa.get(key, default.get(key, "(unset)"))
        vb = fb.get(key, default.get(key, "(unset)"))
        if va != vb:
            return f"{key} = {fa.get(key, '(unset)')!r} vs {fb.get(key, '(unset)')!r}"
    return None


__all__ = ["FREE_KEYS", "FREE_SECTIONS", "config_difference"]
