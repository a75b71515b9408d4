"""Layer 0: Numba kernels on flat arrays. Imports only numpy, numba and math."""
