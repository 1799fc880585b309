"""Shared inputs for the diagnostics tests: q and k built so that bank's row reproduces seed 002."""

import numpy as np
import pytest

# "by the river bank": bank's query is [2.3, 2.3, 0, 0]; these keys give the dot products
# [0.92, 0, 4.6, 1.38] the seed prints (by, the, river, bank).
RIVER_BANK_Q = np.array([
    [0.1, 0.0, 0.9, 0.0],
    [0.0, 0.2, 0.0, 0.8],
    [1.0, 0.4, 0.0, 0.3],
    [2.3, 2.3, 0.0, 0.0],
])
RIVER_BANK_K = np.array([
    [0.4, 0.0, 0.5, 0.0],
    [0.0, 0.0, 1.0, 1.0],
    [1.0, 1.0, 0.0, 0.0],
    [0.3, 0.3, 0.2, 0.7],
])
RIVER_BANK_TOKENS = ("by", "the", "river", "bank")


@pytest.fixture
def river_bank():
    return RIVER_BANK_Q.copy(), RIVER_BANK_K.copy()
