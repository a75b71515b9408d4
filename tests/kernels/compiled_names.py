"""What a cold process compiles: the opening of a ``python -c`` script that appends, from then
on, the name of each function Numba compiles to the list ``compiled``. The tests of what a run
compiles (and only that) add their own code after it."""

from __future__ import annotations

import textwrap

RECORD_COMPILED = textwrap.dedent("""
    import numba.core.event as ev
    from thermonet.kernels.matmul import blas  # noqa: F401
    compiled = []

    class Names(ev.Listener):
        def on_start(self, event):
            pass

        def on_end(self, event):
            compiled.append(event.data["dispatcher"].py_func.__name__)

    ev.register("numba:compile", Names())
""")
