#!/usr/bin/env python
"""One evidence evaluation of MacKay's framework for the paper's classifiers: the Hessian and
its factorisation, Cholesky against the eigendecomposition.

For M(1) and/or M(3) on D500 (cross-entropy plus a Gaussian prior of precision 1 per layer, at
one random parameter vector of scale 0.1 shifted to positive definiteness by adding 10^3 to
the diagonal, so that both factorisations apply): the exact Hessian (the R-operator,
``curvature.hessian``), then ``thermonet.evidence.mackay.factorised.factorise`` with "cholesky" (the
factor, and ``diag(A^-1)`` by LAPACK dpotri: all the framework needs per cycle) and with
"eigh" (the eigendecomposition; ``--no-eigh`` skips it: several minutes for M(3)). Prints
seconds on all cores, the ratio, and the largest relative difference of ``ln det A`` and
``diag(A^-1)`` between the two. Then the matrix-free path (``factorisation = "slq"``,
:mod:`thermonet.evidence.mackay.stochastic`) on the same ``A`` through R-operator products:
its seconds, products per probe, and its ``ln det A`` and per-layer ``Tr_c(A^-1)`` against the
Cholesky values in units of its own standard errors. Usage::

    python benchmarks/bench_mackay_factor.py [--models M1 M3] [--no-eigh] [--shift 1000]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from harness import cpu_model, vector_flags, versions


def main() -> int:
    """Print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["M1", "M3"])
    ap.add_argument("--data", default="D500")
    ap.add_argument("--no-eigh", action="store_true")
    ap.add_argument("--shift", type=float, default=1e3,
                    help="added to the diagonal so that A is positive definite")
    ap.add_argument("--probes", type=int, default=32)
    args = ap.parse_args()

    from thermonet.data import load_data
    from thermonet.evidence.mackay.classify import GaussianPriorClassifier
    from thermonet.evidence.mackay.factorised import factorise
    from thermonet.evidence.mackay.models import layer_groups
    from thermonet.registry import get_architecture

    v = versions()
    print(f"machine : {cpu_model()}; {vector_flags()}; "
          f"llvm cpu {v.get('llvm_cpu')}; "
          f"{os.cpu_count()} logical CPUs; load {os.getloadavg()[0]:.2f}")
    print(f"versions: python {v['python']}, numpy {v['numpy']}, scipy {v['scipy']}, "
          f"numba {v['numba']}; blas {v.get('blas')}")
    split = load_data(args.data, test="official")
    print(f"{'model':>5} {'d':>6} {'hessian s':>10} {'cholesky s':>11} {'diag inv s':>11} "
          f"{'chol total':>11} {'eigh s':>8} {'eigh/chol':>10} {'ln det rel':>11} "
          f"{'diag rel':>9}")
    slq_rows: list[str] = []
    for name in args.models:
        arch = get_architecture(name)
        pot = GaussianPriorClassifier(arch.potential(split.train), layer_groups(arch))
        theta = np.random.default_rng(0).normal(0.0, 0.1, pot.n_params)
        pot.energy_and_grad(theta)                  # compile outside the timings
        t0 = time.perf_counter()
        a = pot.hessian(theta)
        t_h = time.perf_counter() - t0
        a[np.diag_indices_from(a)] += args.shift
        t0 = time.perf_counter()
        chol = factorise(a, "cholesky")
        t_c = time.perf_counter() - t0
        t0 = time.perf_counter()
        d_c = chol.diag_inverse()
        t_d = time.perf_counter() - t0
        row = (f"{name:>5} {pot.n_params:>6} {t_h:>10.1f} {t_c:>11.1f} {t_d:>11.1f} "
               f"{t_c + t_d:>11.1f}")
        slq_rows.append(_slq(pot, theta, args, chol, d_c, layer_groups(arch), name))
        if args.no_eigh:
            print(row + f" {'-':>8} {'-':>10} {'-':>11} {'-':>9}")
            continue
        t0 = time.perf_counter()
        eig = factorise(a, "eigh")
        d_e = eig.diag_inverse()
        t_e = time.perf_counter() - t0
        rel_det = abs(chol.log_det - eig.log_det) / abs(eig.log_det)
        rel_diag = float(np.max(np.abs(d_c - d_e) / np.abs(d_e)))
        print(row + f" {t_e:>8.1f} {t_e / (t_c + t_d):>10.2f} {rel_det:>11.1e} "
              f"{rel_diag:>9.1e}")
    print(f"\nmatrix-free (SLQ + Hutchinson, {args.probes} probes, CG to 1e-6, R-operator "
          "products of A = H + diag(prior precision + shift)):")
    print(f"{'model':>5} {'seconds':>8} {'products/probe':>15} {'ln det (chol)':>14} "
          f"{'SLQ - chol':>11} {'/ se':>6}  Tr_c(A^-1): (SLQ - chol) / se per layer")
    for line in slq_rows:
        print(line)
    return 0


def _slq(pot, theta, args, chol, d_c, groups, name) -> str:
    """One row of the SLQ table."""
    from thermonet.evidence.mackay.stochastic import stochastic_factorise

    shift = args.shift

    def matvec(v):
        return pot.hvp(theta, v) + shift * v

    t0 = time.perf_counter()
    st = stochastic_factorise(matvec, pot.n_params, n_probes=args.probes, seed=0)
    t = time.perf_counter() - t0
    est = st.diag_inverse()
    zs = [(float(est[i].sum()) - float(d_c[i].sum())) / st.group_trace_error(i)
          for i in groups.values()]
    return (f"{name:>5} {t:>8.1f} {st.n_products / args.probes:>15.0f} {chol.log_det:>14.2f} "
            f"{st.log_det - chol.log_det:>11.2f} "
            f"{(st.log_det - chol.log_det) / st.log_det_error:>6.1f}  "
            + " ".join(f"{z:+.1f}" for z in zs))


if __name__ == "__main__":
    raise SystemExit(main())
