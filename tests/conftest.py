"""Test-suite wide settings: Qt offscreen unless a test starts its own X server, hypothesis without
deadlines (first calls JIT-compile numba kernels)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "attnviz", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("attnviz")
