"""The labelled flow of replicas: exact fractions on hand-built paths, the reach of each end,
and crossings."""

from __future__ import annotations

import numpy as np

from thermonet.analysis.replica_flow import flow_line, replica_flow


def test_fractions_and_reach_on_a_hand_built_path():
    # 3 slots, replicas a=0, b=1, c=2; rows: the replica at slots 0, 1, 2 after each iteration
    rows = [[0, 1, 2],      # a cold, c hot, b none
            [1, 0, 2],      # b cold, a(cold) at 1, c hot
            [1, 2, 0]]      # a(cold) reaches the hot end: crossed; c(hot) at 1
    f = replica_flow(rows)
    # slot 1 held b (none), then a (cold), then c (hot)
    assert np.allclose(f.from_cold, [1, 1 / 3, 0])
    assert np.allclose(f.from_hot, [0, 1 / 3, 1])
    assert np.allclose(f.unlabelled, [0, 1 / 3, 0])
    assert f.cold_reach == 2 and f.crossed
    assert flow_line(f, [1.0, 2.0, 3.0]).startswith("replica flow: replicas from T_min reached "
                                                    "the hot end; replicas from the hot end")


def test_a_ladder_cut_in_two_is_reported_with_the_temperatures_of_the_cut():
    # 4 slots; replicas 0, 1 shuttle between slots 0 and 1, replicas 2, 3 between 2 and 3
    rows = [[0, 1, 2, 3], [1, 0, 3, 2]] * 5
    f = replica_flow(rows)
    assert f.cold_reach == 1 and f.hot_reach == 2 and not f.crossed
    assert np.allclose(f.unlabelled, [0, 0.1, 0.1, 0])   # the first row: 1 and 2 unlabelled
    line = flow_line(f, [0.1, 0.2, 0.4, 0.8])
    assert "T_min reached T = 0.2 (slot 1)" in line and "hot end reached T = 0.4 (slot 2)" in line
    assert line.endswith("none crossed")


def test_a_crossing_from_the_hot_end_and_degenerate_inputs():
    rows = [[0, 1, 2], [0, 2, 1], [2, 0, 1]]     # replica 2 goes from the hot end to slot 0
    f = replica_flow(rows)
    assert f.hot_reach == 0 and f.crossed
    assert flow_line(f, [1.0, 2.0, 3.0]) == ("replica flow: replicas from T_min reached T = 2 "
                                            "(slot 1); replicas from the hot end reached T_min")
    empty = replica_flow(np.zeros((0, 3), dtype=int))
    assert empty.cold_reach == -1 and empty.hot_reach == 3 and np.all(empty.unlabelled == 1)
