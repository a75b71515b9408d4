"""Built-in minimisers (entry-point group ``thermonet.minimisers``).

* ``rmin``: :class:`thermonet.minimisers.rmin.RMin`, the paper's Algorithm 3 (Baldock & Marzari
  2019, Sec. 3.3.2), a FIRE-like damped velocity-Verlet descent.
* ``fire``: :class:`thermonet.minimisers.fire.FIRE`, the standard FIRE of Bitzek et al. (2006).

Load them by name through the registry, exactly as a third party's minimiser::

    from thermonet import registry
    RMin = registry.load("minimiser", "rmin")
    result = RMin(max_steps=2000).minimise(potential, theta0)

Both return a :class:`thermonet.api.MinimiseResult`. See docs/minimisers.md.
"""
