"""The Laplace (saddle-point) evidence at a minimum and the curvature it needs.

approximation.py (:func:`laplace_evidence`), curvature.py (exact Hessians and
Hessian-vector products), slq.py (stochastic Lanczos quadrature: the matrix-free
``tr f(A)``, ``ln det A`` among them). The package re-exports their public names.
"""

from __future__ import annotations

from thermonet.evidence.laplace.approximation import DENSE_MAX_PARAMS, laplace_evidence
from thermonet.evidence.laplace.curvature import hessian, hvp
from thermonet.evidence.laplace.slq import slq_trace

__all__ = ["DENSE_MAX_PARAMS", "hessian", "hvp", "laplace_evidence", "slq_trace"]
