"""Built-in quadrature rules for thermodynamic integration."""
