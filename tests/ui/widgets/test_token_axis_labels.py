"""A token axis cuts its labels in the middle by the same rule as the heatmap's readouts."""

from __future__ import annotations

from attnviz.model.display.response_views import compact_label
from attnviz.ui.widgets.token_axis import display_label


def test_the_token_axis_cuts_labels_like_compact_label():
    assert display_label("fast actions3", 12) == compact_label("fast actions3") == "fast actio…3"
    assert display_label("line\nbreak and more text7", 12) == "line↵break…7"  # printable first, then cut
    assert display_label("short", 12) == "short"
