"""How serious a message to the person is, one vocabulary for the whole window: ``ctx.report(level, text)``,
the context's ``message`` signal and ``MainWindow.notify`` all take (level, text). ``info`` goes to the status
bar; ``warning`` and ``error`` also raise the window's notice. A Level is a str (``Level.ERROR == "error"``), so
the colours keyed by name and older callers' strings keep working."""

from __future__ import annotations

from enum import Enum


class Level(str, Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value
