"""Matrix products for the kernels: the backend (MKL, ``np.dot`` or thermonet's own products)
chosen once per process and compiled in, its measurement, and the vector types they use.

:mod:`~thermonet.kernels.matmul.blas` is what kernels call (``gemm``, ``gemm_acc``);
:mod:`~thermonet.kernels.matmul.backend` chooses the library (measured by
:mod:`~thermonet.kernels.matmul.calibration`, with :mod:`~thermonet.kernels.matmul.gemm_timing`
timing the own products in a process of its own); :mod:`~thermonet.kernels.matmul.gemm` holds
the register-blocked products, built on the eight-lane type of
:mod:`~thermonet.kernels.matmul.simd` and the fixed-order sums of
:mod:`~thermonet.kernels.matmul.reduce`.
"""
