"""The FMA peak kernel computes what it says: each chain's value after n steps of acc * A + B equals the
recurrence in float64 to float32 rounding, so no FMA is left out; the measured rate is a positive number (its size
belongs to the benchmark, never to a test)."""

from __future__ import annotations

import numpy as np

from attnviz.engine import peak


def _expected(steps: int) -> float:
    total = 0.0
    for c in range(peak.CHAINS):
        x = 1.0 + c / 1024
        for _ in range(steps * peak.FMAS_PER_STEP):
            x = x * peak.A + peak.B
        total += x
    return total


def test_every_fma_of_every_chain_is_done():
    for steps in (1, 7, 300):
        got = float(peak.chains_sum(steps))
        assert abs(got - _expected(steps)) <= 1e-6 * peak.CHAINS * steps + 1e-5, steps
    assert float(peak.chains_sum(300)) != float(peak.chains_sum(301))


def test_the_rate_is_measured():
    rate = peak.fma_peak_gflops(1, seconds=0.02, rounds=1)
    assert np.isfinite(rate) and rate > 0
