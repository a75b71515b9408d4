"""The robot-arm data set: stored set reproduced by its generator, ranges and noise level."""

from __future__ import annotations

import numpy as np

from thermonet.data import (
    generate_robot_arm,
    load_data,
    read_robot_arm,
    robot_arm_function,
)


def test_generator_reproduces_the_stored_set():
    stored, prov = read_robot_arm()
    fresh = generate_robot_arm(prov["seed"], prov["n_train"])
    for key, arr in stored.items():
        np.testing.assert_array_equal(arr, fresh[key], err_msg=key)


def test_ranges_and_noise_match_neal_1993():
    split = load_data("robot-arm")
    assert split.train.x.shape == split.test.x.shape == (200, 2)
    assert split.train.y.shape == split.test.y.shape == (200, 2)
    for ds in (split.train, split.test):
        a = np.abs(ds.x[:, 0])
        assert np.all((a >= 0.453) & (a <= 1.932))
        assert np.all((ds.x[:, 1] >= 0.534) & (ds.x[:, 1] <= 3.142))
        assert 60 < np.sum(ds.x[:, 0] > 0) < 140            # both arms of x1 (binomial 200, 1/2)
        r = ds.y - robot_arm_function(ds.x)
        # sample variance of 400 N(0, 0.05^2) residuals: relative sd sqrt(2/399) = 7 %
        assert abs(np.var(r) / 0.05**2 - 1.0) < 4 * np.sqrt(2 / 399)
        assert abs(np.mean(r)) < 4 * 0.05 / np.sqrt(400)
    # the known noise-free function: the arm of lengths 2.0 and 1.3
    np.testing.assert_allclose(robot_arm_function(np.array([[0.0, 0.0], [np.pi / 2, np.pi]])),
                               [[3.3, 0.0], [0.0, 0.7]],
                               atol=1e-12)
