"""The mask designer's picture codes without Qt: the bit arithmetic of state_codes against the plain rule, and
the rows a code bit never appears in."""

import numpy as np
import pytest

from attnviz.model.display.mask_codes import (ALLOW, DENY, NONE, PAINT_ALLOW, PAINT_DENY, RULE_ALLOW, RULE_DENY,
                                              THEME_COLOURS, mask_lut, rows_without, state_codes)


@pytest.mark.parametrize("shape", [(7, 13), (16, 64), (1, 1)])
def test_state_codes_equal_the_plain_rule(shape):
    rng = np.random.default_rng(sum(shape))
    rule = rng.random(shape) < 0.5
    overrides = rng.choice(np.array([DENY, NONE, ALLOW], dtype=np.int8), size=shape)
    want = np.where(overrides == ALLOW, PAINT_ALLOW,
                    np.where(overrides == DENY, PAINT_DENY, np.where(rule, RULE_ALLOW, RULE_DENY)))
    got = state_codes(rule, overrides)
    assert got.dtype == np.uint8 and np.array_equal(got, want)
    assert np.array_equal(got & 1, np.where(overrides == NONE, rule, overrides == ALLOW))  # bit 0: the effective mask


def test_rows_without_a_bit_and_the_colour_tables():
    codes = np.zeros((3, 16), np.uint8)
    codes[1, 9] = RULE_ALLOW
    codes[2, 3] = PAINT_DENY
    assert rows_without(codes, 1).tolist() == [True, False, True]
    assert rows_without(codes[:, :5], 2).tolist() == [True, True, False]  # a row length that is no multiple of 8
    for colours in THEME_COLOURS.values():
        assert mask_lut(colours).shape == (256, 4)

