"""Where along the ladder replicas stop: the flow of replicas labelled by the end they last
visited (Katzgraber, Trebst, Huse & Troyer, J. Stat. Mech. 2006, P03018).

Each replica carries the label of the end of the ladder it visited last: *cold* (slot 0) or
*hot* (slot K-1, the prior rung when there is one), or none before it reaches either. On a
ladder that mixes, the fraction of a slot's time held by hot-labelled replicas falls smoothly
from 1 at the hot end to 0 at the cold end, and every replica reaches both ends. Where a band
of temperatures is hard to cross, cold-labelled replicas stop below it and hot-labelled ones
above it: :func:`replica_flow` measures the fractions, and :attr:`ReplicaFlow.cold_reach` /
:attr:`ReplicaFlow.hot_reach` name the hottest slot any replica from the cold end reached and
the coldest slot any replica from the hot end reached. A swap rejection profile can look
healthy across such a band (the energies overlap) while the local sampler there is too slow
to renew a replica's energy between swaps; the flow shows the band directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ReplicaFlow:
    """Occupancy of every slot by label.

    Attributes
    ----------
    from_cold, from_hot, unlabelled : ndarray, shape (K,)
        Fraction of the iterations in which slot k held a replica whose last visited end was
        the cold end, the hot end, or neither yet; the three add up to 1.
    cold_reach : int
        The hottest slot held by a cold-labelled replica (K-1 if one reached the hot end
        from the cold end); -1 if no replica reached the cold end.
    hot_reach : int
        The coldest slot held by a hot-labelled replica (0 if one reached the cold end from
        the hot end); K if no replica reached the hot end.
    """

    from_cold: np.ndarray
    from_hot: np.ndarray
    unlabelled: np.ndarray
    cold_reach: int
    hot_reach: int

    @property
    def crossed(self) -> bool:
        """Whether some replica went from one end to the other."""
        n = self.from_cold.size
        return self.cold_reach == n - 1 or self.hot_reach == 0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReplicaFlow:
        """The inverse of :meth:`to_dict`."""
        return cls(np.asarray(d["from_cold"], dtype=np.float64),
                   np.asarray(d["from_hot"], dtype=np.float64),
                   np.asarray(d["unlabelled"], dtype=np.float64),
                   int(d["cold_reach"]), int(d["hot_reach"]))

    def to_dict(self) -> dict[str, Any]:
        """Plain lists and ints, for JSON."""
        return {"from_cold": [float(v) for v in self.from_cold],
                "from_hot": [float(v) for v in self.from_hot],
                "unlabelled": [float(v) for v in self.unlabelled],
                "cold_reach": int(self.cold_reach), "hot_reach": int(self.hot_reach)}


def replica_flow(replica_k: Any) -> ReplicaFlow:
    """The labelled occupancy of every slot over a run's iterations.

    Parameters
    ----------
    replica_k : array_like of int, shape (n_iterations, K)
        The replica at slot k after each iteration (slot 0 the coldest).

    Returns
    -------
    ReplicaFlow
        All-unlabelled (and reaches -1, K) for no rows.
    """
    r = np.asarray(replica_k)
    n, k = (r.shape if r.ndim == 2 else (0, 0))
    counts = np.zeros((3, k))                 # rows: unlabelled, cold, hot
    if n == 0 or k == 0:
        return ReplicaFlow(counts[1], counts[2], np.ones(k), -1, k)
    label = np.zeros(k, dtype=np.int64)       # per replica: 0 none, 1 cold, 2 hot
    slots = np.arange(k)
    cold_reach, hot_reach = -1, k
    for row in r:
        if k > 1:
            # a replica arriving at one end labelled with the other crossed the ladder
            if label[row[-1]] == 1:
                cold_reach = k - 1
            if label[row[0]] == 2:
                hot_reach = 0
            label[row[-1]] = 2
        label[row[0]] = 1
        lab = label[row]                      # the label of the replica at each slot
        np.add.at(counts, (lab, slots), 1.0)
        cold_slots = slots[lab == 1]
        hot_slots = slots[lab == 2]
        if cold_slots.size:
            cold_reach = max(cold_reach, int(cold_slots[-1]))
        if hot_slots.size:
            hot_reach = min(hot_reach, int(hot_slots[0]))
    counts /= n
    return ReplicaFlow(counts[1], counts[2], counts[0], cold_reach, hot_reach)


def flow_line(flow: ReplicaFlow, temperatures: Any) -> str:
    """One line: how far replicas from each end travelled."""
    t = np.asarray(temperatures, dtype=np.float64)
    k = t.size
    if k < 2:
        return "replica flow: a single rung"
    if flow.cold_reach < 0:
        cold = "no replica reached T_min"
    elif flow.cold_reach == k - 1:
        cold = "replicas from T_min reached the hot end"
    else:
        cold = (f"replicas from T_min reached T = {t[flow.cold_reach]:.4g} (slot "
                f"{flow.cold_reach})")
    if flow.hot_reach >= k:
        hot = "no replica reached the hot end"
    elif flow.hot_reach == 0:
        hot = "replicas from the hot end reached T_min"
    else:
        hot = (f"replicas from the hot end reached T = {t[flow.hot_reach]:.4g} (slot "
               f"{flow.hot_reach})")
    return f"replica flow: {cold}; {hot}" + ("" if flow.crossed else "; none crossed")
