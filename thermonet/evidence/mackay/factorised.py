"""The factorisation of MacKay's Hessian ``A = nabla nabla M`` at ``w_MP``: what the evidence
framework needs of it, by an eigendecomposition or, for large networks, a Cholesky factor.

The framework needs ``ln det A`` (the Occam factor), the diagonal of ``A^-1`` (the
well-determined parameters ``gamma_c``), whether ``A`` is positive definite (a minimum),
solves ``A^-1 g`` (Newton steps) and ``g^T A^-1 g`` (error bars). An eigendecomposition gives
all of them and the directions of negative curvature (to leave a saddle); it costs about
``9 d^3`` flops. A Cholesky factor ``A = L L^T`` gives them for ``d^3/3`` flops, and the
diagonal of the inverse for another ``d^3/3`` (LAPACK ``dpotri``): for M(3)'s 13,970
parameters 24 s + 37 s against 242 s for the eigenvalues alone (docs/performance.md). So
``"auto"`` decomposes up to :data:`EIGH_MAX` parameters and factorises above; a Cholesky
factorisation that fails (``A`` not positive definite) falls back to the decomposition, whose
eigenvectors then show the way out of the saddle.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from thermonet.errors import ConfigError
from thermonet.types import FloatArray

log = logging.getLogger("thermonet.evidence")

#: parameters up to which ``"auto"`` uses the eigendecomposition
EIGH_MAX = 4000
METHODS = ("auto", "eigh", "cholesky")


@dataclass
class Factorised:
    """``A`` factorised by ``method`` ("eigh" or "cholesky").

    ``eigenvalues`` (ascending) and ``eigenvectors`` are set by "eigh" only; ``factor`` (the
    lower Cholesky factor) by "cholesky" only.
    """

    method: str
    positive_definite: bool
    eigenvalues: FloatArray | None = None
    eigenvectors: FloatArray | None = None
    factor: FloatArray | None = None
    _diag_inv: FloatArray | None = field(default=None, repr=False)

    @property
    def log_det(self) -> float:
        """``ln det A`` (NaN unless positive definite)."""
        if not self.positive_definite:
            return math.nan
        if self.factor is not None:
            return 2.0 * float(np.sum(np.log(np.diag(self.factor))))
        assert self.eigenvalues is not None
        return float(np.sum(np.log(self.eigenvalues)))

    @property
    def lambda_min(self) -> float:
        """The smallest eigenvalue (NaN for a Cholesky factor, which does not give it)."""
        return math.nan if self.eigenvalues is None else float(self.eigenvalues[0])

    def diag_inverse(self, floored: bool = False) -> FloatArray:
        """``diag(A^-1)``. ``floored``: with the eigenvalues raised to ``1e-9`` of the largest
        (defined at a saddle too); otherwise NaN unless positive definite."""
        if self.factor is not None:
            if self._diag_inv is None:    # d^3/3 flops: once per factor
                import scipy.linalg

                inv, info = scipy.linalg.lapack.dpotri(self.factor, lower=True)
                if info != 0:
                    raise ConfigError(f"LAPACK dpotri failed (info = {info}) on a Cholesky "
                                      "factor")
                self._diag_inv = np.array(np.diag(inv))
            return self._diag_inv.copy()
        lam, u = self.eigenvalues, self.eigenvectors
        assert lam is not None and u is not None
        if floored:
            lam = np.maximum(lam, 1e-9 * max(float(lam[-1]), 1e-300))
        elif not self.positive_definite:
            return np.full(lam.shape[0], math.nan)
        return np.asarray(np.einsum("ij,j,ij->i", u, 1.0 / lam, u))

    def solve(self, b: FloatArray) -> FloatArray:
        """``A^-1 b`` (``A`` must be positive definite)."""
        if self.factor is not None:
            import scipy.linalg

            return np.asarray(scipy.linalg.cho_solve((self.factor, True), b))
        lam, u = self.eigenvalues, self.eigenvectors
        assert lam is not None and u is not None
        b = np.asarray(b, dtype=np.float64)
        return np.asarray(u @ ((u.T @ b) / lam.reshape((-1,) + (1,) * (b.ndim - 1))))

    def whiten(self, g: FloatArray) -> FloatArray:
        """Rows ``r`` (same shape as ``g``, last axis the parameters) with ``r_a . r_b =
        g_a^T A^-1 g_b``: error bars are sums of their products."""
        g = np.asarray(g, dtype=np.float64)
        if self.factor is not None:
            import scipy.linalg

            flat = g.reshape(-1, g.shape[-1])
            out = scipy.linalg.solve_triangular(self.factor, flat.T, lower=True).T
            return np.asarray(out.reshape(g.shape))
        lam, u = self.eigenvalues, self.eigenvectors
        assert lam is not None and u is not None
        return np.asarray((g @ u) / np.sqrt(lam))

    def from_white(self, z: FloatArray) -> FloatArray:
        """``S z`` for the square root ``S S^T = A^-1`` (``L^-T z``, or ``U diag(lam^-1/2)
        z``): white coordinates ``z ~ N(0, I)`` mapped to ``N(0, A^-1)``."""
        z = np.asarray(z, dtype=np.float64)
        if self.factor is not None:
            import scipy.linalg

            return np.asarray(scipy.linalg.solve_triangular(self.factor, z, lower=True,
                                                            trans="T"))
        lam, u = self.eigenvalues, self.eigenvectors
        assert lam is not None and u is not None
        return np.asarray(u @ (z / np.sqrt(lam)))

    def to_white(self, g: FloatArray) -> FloatArray:
        """``S^T g``: a gradient in ``w`` as one in the white coordinates of :meth:`from_white`
        (for a 1-D ``g``; :meth:`whiten` does rows)."""
        return self.whiten(np.asarray(g, dtype=np.float64)[None])[0]

    def quadratic(self, v: FloatArray) -> float:
        """``v^T A v`` (the squared length of ``v`` in the white coordinates of
        :meth:`from_white`), from the factor without forming ``A``."""
        v = np.asarray(v, dtype=np.float64)
        if self.factor is not None:
            import scipy.linalg

            # L^T v from the lower triangle only (the upper one of the factor is not zeroed)
            lt_v = scipy.linalg.blas.dtrmv(self.factor, v, lower=1, trans=1)
            return float(np.dot(lt_v, lt_v))
        assert self.eigenvalues is not None and self.eigenvectors is not None
        return float(np.sum(self.eigenvalues * (self.eigenvectors.T @ v) ** 2))

    def diagonal(self) -> FloatArray:
        """``diag(A)``."""
        if self.factor is not None:
            return np.asarray(np.sum(np.tril(self.factor) ** 2, axis=1))
        assert self.eigenvalues is not None and self.eigenvectors is not None
        u = self.eigenvectors
        return np.asarray(np.einsum("ij,j,ij->i", u, self.eigenvalues, u))

    def covariance(self) -> FloatArray:
        """``A^-1``."""
        return self.solve(np.eye(self.factor.shape[0] if self.factor is not None
                                 else len(self.eigenvalues)))  # type: ignore[arg-type]


def factorise(a: FloatArray, method: str = "auto") -> Factorised:
    """Factorise the symmetric matrix ``a`` (module docstring); ``a`` is not changed."""
    if method not in METHODS:
        raise ConfigError(f"factorisation {method!r}; expected one of {METHODS}")
    d = a.shape[0]
    finite = bool(np.all(np.isfinite(a)))     # one pass over a matrix of up to ~1.6 GB
    if method == "cholesky" or (method == "auto" and d > EIGH_MAX):
        import scipy.linalg

        if finite:
            try:
                low, _ = scipy.linalg.cho_factor(a, lower=True, check_finite=False)
                # only the lower triangle is read below (LAPACK leaves the upper as it was)
                return Factorised("cholesky", True, factor=low)
            except np.linalg.LinAlgError:
                log.info("the Hessian (%d parameters) is not positive definite: "
                         "eigendecomposition instead of the Cholesky factor", d)
    if not finite:
        return Factorised("eigh", False, eigenvalues=np.full(d, math.nan),
                          eigenvectors=np.full((d, d), math.nan))
    lam, u = np.linalg.eigh(a)
    pd = bool(lam.size == 0 or (np.all(np.isfinite(lam)) and lam[0] > 0))
    return Factorised("eigh", pd, eigenvalues=lam, eigenvectors=u)


__all__ = ["EIGH_MAX", "METHODS", "Factorised", "factorise"]
