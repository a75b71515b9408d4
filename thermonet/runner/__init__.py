"""The runner: a configuration built, sampled, checkpointed and resumed in a run directory.

run.py (:class:`Run`: create, open and advance a run directory; :func:`run`), components.py
(build, initial state, resume configuration), initialisation.py (a run's first state),
progress.py, runlog.py (DIR/thermonet.log), compile_notice.py (kernels warmed before the
clock starts). The package re-exports the public names of run.py.
"""

from __future__ import annotations

from thermonet import __version__
from thermonet.runner.components import EXTENDABLE, Components, build
from thermonet.runner.progress import FROZEN_WINDOW, RunProgress
from thermonet.runner.run import Run, run
from thermonet.runner.runlog import detach_log

__all__ = ["EXTENDABLE", "FROZEN_WINDOW", "Components", "Run", "RunProgress", "__version__",
           "build", "detach_log", "run"]
