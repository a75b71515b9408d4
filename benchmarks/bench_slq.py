#!/usr/bin/env python
"""The matrix-free path of MacKay's framework at a real w_MP: SLQ and Hutchinson against the
Cholesky factor of the same positive definite ``A``.

For M(3) (or ``--model``) on D500 with a Gaussian prior of precision ``--alpha`` per layer:
``w_MP`` by the framework's level 1 (``evaluate_at``, Gauss-Newton curvature), then ``A`` (the
Gauss-Newton form, positive definite) formed and Cholesky-factorised, and the stochastic
estimates of ``ln det A`` and the per-layer ``Tr_c(A^-1)`` from products with ``A`` (32
probes, CG to 1e-6): seconds, products per probe, and the differences in units of the
estimates' own standard errors. Usage::

    python benchmarks/bench_slq.py [--model M3] [--alpha 1.0] [--probes 32]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from harness import cpu_model, vector_flags, versions


def main() -> int:
    """Print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="M3")
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--probes", type=int, default=32)
    args = ap.parse_args()

    from thermonet.data import load_data
    from thermonet.evidence.mackay.classify import GaussianPriorClassifier
    from thermonet.evidence.mackay.factorised import factorise
    from thermonet.evidence.mackay.framework import evaluate_at
    from thermonet.evidence.mackay.models import layer_groups
    from thermonet.evidence.mackay.stochastic import stochastic_factorise
    from thermonet.registry import get_architecture

    v = versions()
    print(f"machine : {cpu_model()}; {vector_flags()}; "
          f"llvm cpu {v.get('llvm_cpu')}; numpy {v['numpy']}, scipy {v['scipy']}")
    arch = get_architecture(args.model)
    groups = layer_groups(arch)
    pot = GaussianPriorClassifier(arch.potential(load_data("D500", test="official").train),
                                  groups, curvature="gauss-newton")
    t0 = time.perf_counter()
    r = evaluate_at(pot, np.random.default_rng(0).normal(0.0, 0.3, pot.n_params),
                    [args.alpha] * len(groups), newton_steps=0)
    print(f"{args.model}: w_MP and the evidence at alpha = {args.alpha}: "
          f"{time.perf_counter() - t0:.1f} s (level 1, Gauss-Newton A, Cholesky, diag A^-1)")
    a = pot.hessian(r.theta)
    t0 = time.perf_counter()
    chol = factorise(a, "cholesky")
    d_c = chol.diag_inverse()
    t_c = time.perf_counter() - t0
    lam = np.linalg.eigvalsh(a[:: max(1, a.shape[0] // 2000), :: max(1, a.shape[0] // 2000)])
    t0 = time.perf_counter()
    st = stochastic_factorise(lambda x: x @ a, pot.n_params, n_probes=args.probes, seed=0)
    t_s = time.perf_counter() - t0
    print(f"Cholesky + diag(A^-1): {t_c:.1f} s; SLQ + Hutchinson ({args.probes} probes, dense "
          f"products): {t_s:.1f} s, {st.n_products / args.probes:.0f} products per probe "
          f"(a submatrix's eigenvalues span {lam[0]:.3g}..{lam[-1]:.3g})")
    print(f"ln det A: Cholesky {chol.log_det:.2f}, SLQ {st.log_det:.2f} +- "
          f"{st.log_det_error:.2f} ({(st.log_det - chol.log_det) / st.log_det_error:+.1f} se)")
    for name, idx in groups.items():
        exact = float(d_c[idx].sum())
        est = float(st.diag_inverse()[idx].sum())
        se = st.group_trace_error(idx)
        print(f"Tr_{name}(A^-1): Cholesky {exact:.4g}, Hutchinson {est:.4g} +- {se:.2g} "
              f"({(est - exact) / se:+.1f} se)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
