"""The window's command line: an autosave interval that is not a sensible number of seconds is one line
from argparse (exit 2) before Qt starts; 1e308 overflowed the timer with a traceback."""

from __future__ import annotations

import pytest

from attnviz.app_start import AUTOSAVE_RANGE, build_parser


@pytest.mark.parametrize("value", ["1e308", "nan", "inf", "-1", "0", "abc", "86401"])
def test_a_bad_autosave_interval_is_refused_in_one_line(value, capsys):
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(["--autosave-interval", value])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--autosave-interval" in err and "Traceback" not in err


@pytest.mark.parametrize("value", [str(AUTOSAVE_RANGE[0]), "1", "30", str(AUTOSAVE_RANGE[1])])
def test_sensible_intervals_are_taken(value):
    assert build_parser().parse_args(["--autosave-interval", value]).autosave_interval == float(value)
