"""Built-in architectures: the paper's networks and the generic MLP (:mod:`.mlp`).

Look them up by name with :func:`thermonet.get_architecture` (the registry): built-in plugins
import only the plugin API, so the lookup does not live here.
"""
