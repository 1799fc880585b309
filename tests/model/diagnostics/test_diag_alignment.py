"""The cross-attention alignment table laid out like seed 001's."""

import numpy as np
import pytest

from attnviz.model.diagnostics.alignment import alignment_table

SEED_TABLE = [[0.94, 0.02, 0.04], [0.11, 0.01, 0.88], [0.03, 0.95, 0.02]]


def test_seed_table_alignment():
    t = alignment_table(SEED_TABLE, ["je", "t'", "aime"], ["I", "love", "you"])
    assert [(r.label, r.best_label, r.best_weight) for r in t.rows] == [
        ("je", "I", 0.94), ("t'", "you", 0.88), ("aime", "love", 0.95)]
    assert np.array_equal(t.argmax, [0, 2, 1])
    text = t.to_text().splitlines()
    assert text[0].split() == ["I", "love", "you"]
    assert text[2].split() == ["t'", "0.11", "0.01", "[0.88]"]


def test_empty_row_and_shape_errors():
    t = alignment_table([[0.0, 0.0], [0.3, 0.7]], ["a", "b"], ["x", "y"])
    assert t.rows[0].best == -1 and t.rows[0].best_label == "" and t.rows[1].best_label == "y"
    with pytest.raises(ValueError, match="len"):
        alignment_table(SEED_TABLE, ["je"], ["I", "love", "you"])
