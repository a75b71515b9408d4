"""Basins of a network's energy: the exact symmetries that copy a basin (symmetry.py) and
the census of measured basins that bounds a model's evidence (census.py)."""
