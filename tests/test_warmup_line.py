"""The engine's warm-up before the first test is its own line of the test run's summary (one per xdist
worker), measured, and not charged to the first test's setup in --durations."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ONE_TEST = "tests/test_json_readers_hostile.py::test_the_guard_keeps_what_strings_hold_out_of_the_count"
LINE = r"engine kernels{}: \d+ loaded from the cache(, \d+ compiled)? in \d+\.\d s \(before the first test"


def _pytest(*args) -> str:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTEST_ADDOPTS": ""}
    out = subprocess.run([sys.executable, "-m", "pytest", ONE_TEST, "-p", "no:cacheprovider", "--durations=0",
                          "--durations-min=0", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _setups(stdout: str) -> list[float]:
    return [float(s) for s in re.findall(r"^([\d.]+)s setup ", stdout, re.M)]


@pytest.mark.parametrize("xdist, who", [(("-p", "no:xdist"), [""]), (("-n", "2"), [" \\(gw0\\)", " \\(gw1\\)"])])
def test_the_warm_up_is_its_own_line_and_not_in_the_first_test(xdist, who):
    stdout = _pytest(*xdist)
    for name in who:
        assert len(re.findall(LINE.format(name), stdout)) == 1, stdout
    assert max(_setups(stdout), default=0.0) < 0.5, stdout
