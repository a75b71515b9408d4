"""A finished (or paused) run read back, read-only: :func:`open_run` returns a
:class:`RunRecord`, the one reader of a run directory that the workflows (``analyse``,
``info``, ``compare``, ``export``, the evidence and the plots) and users share.

::

    import thermonet as tn
    rec = tn.open_run("runs/robot_arm")
    rec.ladder.temperature_k, rec.discard, rec.verdict.mixed
    theta = rec.samples()                       # (S, n_params) after the run's discard
    pred = rec.predict("new_cases.csv")         # the posterior predictive on new data
    idata = rec.to_inference_data("new_cases.csv")   # ArviZ, with posterior_predictive

The burn-in fraction is the run's ``run.discard``; a run whose stored configuration lacks it
uses the schema's default (:data:`thermonet.config.RUN_KEYS`), the one place it is set.
The reading itself is :class:`~thermonet.analysis.run_reader.RunReader`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from thermonet.analysis.run_reader import (
    T_MATCH_RTOL,
    RunReader,
    check_discard,
    default_discard,
    first_kept,
    read_config,
    stored_config,
    temperature_label,
)

if TYPE_CHECKING:
    from thermonet.analysis.prediction import Prediction


class RunRecord(RunReader):
    """A run directory, read once and never written (:class:`RunReader`), with its
    posterior predictive on new data. Build it with :func:`open_run`."""

    def predict(self, data: Any, temperature: float | None = None, *,
                quantiles: tuple[float, ...] = (0.05, 0.5, 0.95),
                mnist_dir: str | None = None) -> Prediction:
        """The posterior predictive of the stored samples at ``temperature`` on ``data``.

        ``data``: a file thermonet reads (regression: CSV/NPZ/HDF5 with the run's columns;
        classification: IDX images, an NPZ of ``images`` and ``labels``), a data set name
        (``D500``, ``mnist-t10k``), ``"train"``/``"test"`` (the run's own sets) or a
        :class:`~thermonet.data.Dataset`. See :mod:`thermonet.analysis.prediction`.
        """
        from thermonet.analysis.prediction import predict_run

        return predict_run(self, data, temperature, quantiles=quantiles, mnist_dir=mnist_dir)

    def to_inference_data(self, data: Any = None, temperature: float | None = None, *,
                          mnist_dir: str | None = None) -> Any:
        """The kept trace as ``arviz.InferenceData`` (:func:`thermonet.analysis.export.
        inference_data`), with a ``posterior_predictive`` group (and ``observed_data`` when
        ``data`` has targets) of the predictive at ``temperature`` when ``data`` is given."""
        from thermonet.analysis.export import inference_data

        return inference_data([self], data=data, temperature=temperature, mnist_dir=mnist_dir)


def open_run(path: str | Path, *, discard: float | None = None) -> RunRecord:
    """Open the run directory ``path`` (made by ``thermonet run``) for reading.

    Parameters
    ----------
    path : path
    discard : float, optional
        Burn-in fraction [default: the run's ``run.discard``].

    Raises
    ------
    CheckpointError
        One line (:func:`~thermonet.io.checkpoint.read_checkpoint`'s): no such directory, no
        or a corrupt checkpoint; or a stored configuration that is not TOML.
    ConfigError
        ``discard`` outside [0, 1).
    """
    return RunRecord(*read_config(path, discard))


__all__ = ["T_MATCH_RTOL", "RunRecord", "check_discard", "default_discard", "first_kept",
           "open_run", "stored_config", "temperature_label"]
