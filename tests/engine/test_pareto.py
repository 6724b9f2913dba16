"""Pareto masks and hypervolume against brute force."""

import numpy as np
import pytest

from hwnas.engine.pareto import hypervolume, pareto_mask


def brute_force(acc, cost):
    n = len(acc)
    return np.array(
        [
            not any(
                acc[j] >= acc[i] and cost[j] <= cost[i] and (acc[j] > acc[i] or cost[j] < cost[i])
                for j in range(n)
            )
            for i in range(n)
        ]
    )


@pytest.mark.parametrize("seed", range(5))
def test_mask_equals_brute_force_with_ties(seed):
    rng = np.random.default_rng(seed)
    acc = rng.integers(0, 12, 200).astype(float)  # many ties in both objectives
    cost = rng.integers(0, 12, 200).astype(float)
    np.testing.assert_array_equal(pareto_mask(acc, cost), brute_force(acc, cost))


def test_hypervolume_of_a_staircase():
    acc = np.array([1.0, 2.0, 1.5])
    cost = np.array([1.0, 2.0, 3.0])  # the third is dominated
    assert hypervolume(acc, cost, ref_accuracy=0.0, ref_cost=3.0) == pytest.approx(2 * 1 + 1 * 1)
    assert hypervolume(acc, cost, ref_accuracy=5.0, ref_cost=3.0) == 0.0
