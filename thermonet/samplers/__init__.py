"""Built-in samplers (HMC), registered in the ``thermonet.samplers`` entry-point group."""
