"""MacKay's evidence framework (MacKay 1992): re-estimated hyperparameters and the
Gaussian-approximation evidence, for regression and classification networks.

framework.py (the re-estimation and the evidence), level1.py (``w_MP`` and the Hessian
there), factorised.py (eigendecomposition or Cholesky factor of ``A``), stochastic.py (the
matrix-free estimates for large networks), classify.py (classifiers), models.py and sweep.py
(models compared, architecture sweeps), hmc.py and versus_ti.py (the Gaussian approximation
against sampling and against thermodynamic integration). The package re-exports the public
names of framework.py.
"""

from __future__ import annotations

from thermonet.evidence.mackay.framework import (
    MacKayResult,
    evaluate_at,
    jacobian,
    log_symmetry_factor,
    mackay_evidence,
    predictive,
    reestimate,
)

__all__ = ["MacKayResult", "evaluate_at", "jacobian", "log_symmetry_factor",
           "mackay_evidence", "predictive", "reestimate"]
