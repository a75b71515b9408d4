"""Basin evidence against model evidence on an analytic mixture: docs/figures/basin_vs_model.png.

The target of tests/analysis/test_model_evidence.py: four Gaussian modes in the box |w_i| < 8, mapped
onto each other in pairs by w -> -w (|G| = 2), two narrow heavy ones at (±5, 0) and two wide
light ones at (0, ±5). Its exact log evidence is known. Shown, each with its error bar:
basin TI from a narrow mode and from a wide one (6 seeds each, mean ± standard error), the
narrow basin times its |G| copies, the census of the two distinct basins plus ln|G|, and the
global estimates from a prior-anchored ladder (stepping stone and integration over beta).

    python scripts/basin_vs_model_figure.py [--out docs/figures/basin_vs_model.png]

About a minute of CPU; prints the numbers it plots.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from thermonet.analysis.free_energy import free_energies
from thermonet.evidence.basins.census import census
from thermonet.evidence.ti.integration import TIConfig, repeat_ti
from thermonet.priors import BoxPrior
from thermonet.samplers.hmc import HMC
from thermonet.tempering import DeterministicEvenOdd, Ladder, ReplicaExchange
from thermonet.testsystems import GaussianMixture

MEANS = [[5.0, 0.0], [-5.0, 0.0], [0.0, 5.0], [0.0, -5.0]]
WIDTHS = [0.3, 0.3, 0.7, 0.7]
WEIGHTS = [0.4, 0.4, 0.1, 0.1]


def main() -> None:
    """Compute the six estimates, print them and draw the figure."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/figures/basin_vs_model.png")
    args = ap.parse_args()
    mix = GaussianMixture(means=MEANS, widths=WIDTHS, weights=WEIGHTS, prior_scale=16.0)
    pot, prior = mix.potential(), BoxPrior.for_architecture(mix)
    lv = prior.log_volume
    exact = mix.log_integral() - lv
    comp = mix.component_log_integrals() - lv
    cfg = TIConfig(n_bridges=20, n_burn_in=20, n_samples=200, n_leapfrog=10, step_size=0.1,
                   kfit_burn_in=100, kfit_samples=300, initial_burn_in=100)
    basin = {}
    for mode in (0, 2):
        _, mean, sd = repeat_ti(pot, np.array(MEANS[mode]), prior, cfg, seeds=range(6))
        basin[mode] = (mean - lv, sd / math.sqrt(6))
    log_g = math.log(2.0)
    c = census([basin[0][0], basin[2][0]], [basin[0][1], basin[2][1]],
               [np.array([0.0]), np.array([1.0])], log_g)
    ladder = Ladder.geometric(1.0, 200.0, 20).with_prior_rung()
    re = ReplicaExchange(HMC, pot, ladder, prior=prior, swap=DeterministicEvenOdd(),
                         sampler_config=HMC.Config(n_leapfrog=8, step_size=0.2))
    streams = re.make_streams(3)
    st = re.burn_in(mix.initial_draw, streams, blocks=(20,))
    rows = []
    for i in range(1, 3001):
        st, info = re.step(st, streams, iteration=i)
        if i > 300:
            rows.append(info.energy_k)
    fe = free_energies(re.ladder.beta_k, np.array(rows))
    entries = [
        ("basin TI, narrow mode", *basin[0], comp[0]),
        ("basin TI, wide mode", *basin[2], comp[2]),
        ("narrow basin + ln|G|", basin[0][0] + log_g, basin[0][1], None),
        ("census: 2 distinct basins + ln|G|", c.bound, c.bound_error, None),
        ("global: stepping stone", fe.log_z_ss_k[0], fe.log_z_ss_err_k[0], None),
        ("global: integration over beta", fe.log_z_ti_k[0], fe.log_z_ti_err_k[0], None),
    ]
    print(f"exact log evidence {exact:.4f}")
    for name, v, e, ref in entries:
        extra = "" if ref is None else f"   (exact basin {ref:.4f})"
        print(f"{name:<36} {v:8.4f} ± {e:.4f}   deviation {v - exact:+.4f}{extra}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    y = np.arange(len(entries))[::-1]
    for yi, (name, v, e, ref) in zip(y, entries, strict=True):
        colour = "tab:green" if name.startswith(("census", "global")) else "tab:red"
        ax.errorbar(v, yi, xerr=e, fmt="o", color=colour, capsize=3)
        if ref is not None:
            ax.plot(ref, yi, "|", color="grey", markersize=14)
    ax.axvline(exact, color="black", lw=1, label=f"exact model log evidence {exact:.3f}")
    ax.set_yticks(y, [n for n, *_ in entries])
    ax.set_xlabel("log evidence (box prior)")
    ax.set_title("Basin evidence vs model evidence: 4-mode mixture, |G| = 2", fontsize=10)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
