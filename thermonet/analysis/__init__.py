"""Analysis of a run: per-temperature energies and errors with error bars, the Bayesian
predictive, the stopping rule and ladder health (``thermonet analyse``).

* :mod:`.ladder`: trace statistics (series, heat capacity, round trips, swaps);
* :mod:`.convergence`: rank-normalised split-R-hat, bulk and tail ESS;
* :mod:`.mixing`: restarts, swap barrier, rung acceptance and the mixing verdict;
* :mod:`.stopping`: the stopping rule;
* :mod:`.samples`: evaluation of stored samples;
* :mod:`.report`: the :class:`Analysis` record and its files;
* :mod:`.pipeline`: :func:`analyse` and :func:`summarise`.
"""

from __future__ import annotations

from thermonet.analysis.ladder import (
    MIN_SAMPLES,
    MIN_TAU_MULTIPLE,
    SWAP_WARN_THRESHOLD,
    chains_stats,
    heat_capacity,
    round_trips,
    round_trips_per_replica,
    series_stats,
    swap_table,
)
from thermonet.analysis.mixing import (
    Mixing,
    Verdict,
    assess,
    ess_bulk,
    ess_tail,
    replica_passages,
    rung_acceptance,
    split_rhat,
    swap_barrier,
    verdict,
)
from thermonet.analysis.pipeline import (
    analyse,
    summarise,
)
from thermonet.analysis.report import (
    ANALYSIS_FORMAT,
    ANALYSIS_VERSION,
    PAIR_COLUMNS,
    TABLE_COLUMNS,
    Analysis,
    read_analysis,
)
from thermonet.analysis.samples import (
    SampleEvaluation,
    evaluate_samples,
)
from thermonet.analysis.stopping import (
    STOP_PATIENCE,
    STOP_SIGMA,
    stopping_rule,
)

__all__ = [
    "ANALYSIS_FORMAT",
    "ANALYSIS_VERSION",
    "MIN_SAMPLES",
    "MIN_TAU_MULTIPLE",
    "PAIR_COLUMNS",
    "STOP_PATIENCE",
    "STOP_SIGMA",
    "SWAP_WARN_THRESHOLD",
    "TABLE_COLUMNS",
    "Analysis",
    "Mixing",
    "SampleEvaluation",
    "Verdict",
    "analyse",
    "assess",
    "chains_stats",
    "ess_bulk",
    "ess_tail",
    "evaluate_samples",
    "heat_capacity",
    "read_analysis",
    "replica_passages",
    "round_trips",
    "round_trips_per_replica",
    "rung_acceptance",
    "series_stats",
    "split_rhat",
    "stopping_rule",
    "summarise",
    "swap_barrier",
    "swap_table",
    "verdict",
]
