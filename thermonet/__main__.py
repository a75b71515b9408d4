"""``python -m thermonet``: the same as the ``thermonet`` command."""

from thermonet.cli import main

main()
