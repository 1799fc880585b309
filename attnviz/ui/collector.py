"""The cyclic garbage collector and the window's long-lived objects.

A full pass of Python's cyclic collector walks every object it tracks. Once a workspace's panels are built
they are hundreds of thousands of objects (Qt wrappers, pyqtgraph items, their dicts and lists) that live as
long as the window, and a full pass falling in a later step walked all of them: on the long-context demo the
Pretrained workspace's first visit, after four other workspaces, had a step of 143-184 ms of GUI-thread CPU
that was 70 ms with the collector off (benchmarks/README.md). :func:`gc.freeze` moves every object that
exists into the permanent generation, which passes do not walk: it is called when the window has first
painted and after each panel is built. What is frozen is still freed when its last reference goes; only
a reference cycle among frozen objects outlives its use, and those are the panels themselves. Garbage that
is young when a freeze comes (a worker's cycles not yet collected) would be frozen with the rest and never
freed, so each freeze first collects the two young generations (cheap: they hold only what was made since
the last pass).

The application turns this on (:func:`enable`); tests, which build and close hundreds of windows in one
process, keep the collector as it is.
"""

from __future__ import annotations

import gc

_state = {"on": False}


def enable() -> None:
    """Freeze what exists now, and after every panel built from now on (:func:`panels_built`)."""
    _state["on"] = True
    _freeze()


def enabled() -> bool:
    return _state["on"]


def panels_built() -> None:
    """A panel was built and placed: its objects live as long as the window (a no-op unless enabled)."""
    if _state["on"]:
        _freeze()


def _freeze() -> None:
    gc.collect(1)  # the young generations' garbage first: frozen, it would never be freed
    gc.freeze()
