"""BusyOverlay: a veil over a view whose picture is still being computed, saying what is computed,
with a running progress bar and, when the work can be stopped, a Cancel button.

The overlay covers its target widget (it follows its size), lets the last picture show through
dimmed, and appears only after a short delay so that quick work does not flicker. A view never
shows empty axes, or a previous picture, without saying that its result is on the way.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from attnviz.ui.theme import current_theme

SHOW_DELAY_MS = 250  # work shorter than this never shows the overlay
LIVE_DELAY_MS = 1000  # over a picture that is still useful (live edits), wait longer before veiling it
#: what a veiled view and the status bar say after Cancel, until the next result
STALE_TEXT = "cancelled — showing the previous result"


class BusyOverlay(QWidget):
    """Covers ``target`` while :meth:`start` ... :meth:`stop`; ``cancelled`` when Cancel is pressed.

    The overlay is a child of ``target``, or of ``host`` when given (a QSplitter takes every child
    widget as a pane: cover it from its parent)."""

    cancelled = Signal()

    def __init__(self, target: QWidget, host: QWidget | None = None, *, delay_ms: int = SHOW_DELAY_MS):
        super().__init__(host if host is not None else target)
        self._host = host
        self.setObjectName("busy_overlay")
        self._target = target
        self._active = False
        self._stale = False  # show_stale's veil: an older picture than the controls ask for
        self.label = QLabel("", self)
        self.label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 0)  # running, length unknown
        self.bar.setTextVisible(False)
        self.bar.setFixedWidth(180)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.cancelled)
        box = QWidget(self)
        box.setObjectName("busy_box")
        inner = QVBoxLayout(box)
        inner.setContentsMargins(16, 12, 16, 12)
        inner.addWidget(self.label)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.bar)
        row.addWidget(self.cancel_button)
        row.addStretch(1)
        inner.addLayout(row)
        self.box = box
        outer = QVBoxLayout(self)
        outer.addStretch(1)
        outer.addWidget(box, 0, Qt.AlignmentFlag.AlignHCenter)
        outer.addStretch(1)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._delay = int(delay_ms)
        self._timer.timeout.connect(self._appear)
        target.installEventFilter(self)
        self.setVisible(False)

    # -- public --------------------------------------------------------------------------------
    def start(self, text: str, cancellable: bool = False, delay_ms: int | None = None) -> None:
        """Say that ``text`` is being computed (shown after the delay — ``delay_ms`` or the
        overlay's own — unless stopped before)."""
        self.label.setText(text)
        self.cancel_button.setVisible(cancellable)
        self.bar.setVisible(True)
        if self._stale:  # the veil is up already: it says at once what is computed now
            self._stale = False
            self._active = True
            self._appear()
        elif not self._active:
            self._active = True
            self._timer.start(self._delay if delay_ms is None else int(delay_ms))

    def show_stale(self, text: str) -> None:
        """Veil the picture at once, without progress or Cancel: it is an older result than the
        controls ask for (``text`` says why) until :meth:`start` or :meth:`stop`."""
        self._timer.stop()
        self._active = True
        self._stale = True
        self.label.setText(text)
        self.bar.setVisible(False)
        self.cancel_button.setVisible(False)
        self._appear()

    def is_stale(self) -> bool:
        """True while :meth:`show_stale`'s veil is up."""
        return self._stale

    def stop(self) -> None:
        self._active = False
        self._stale = False
        self._timer.stop()
        self.setVisible(False)

    def is_active(self) -> bool:
        """True from :meth:`start` to :meth:`stop` (whether or not the delay has passed)."""
        return self._active

    def text(self) -> str:
        return self.label.text()

    # -- internals -----------------------------------------------------------------------------
    def _place(self) -> None:
        t = self._target
        if self._host is None:
            self.setGeometry(t.rect())
        else:
            self.setGeometry(QRect(t.mapTo(self._host, QPoint(0, 0)), t.size()))

    def _appear(self) -> None:
        if self._active:
            self._place()
            theme = current_theme()
            self.box.setStyleSheet(f"QWidget#busy_box {{ background: {theme.window}; border: 1px solid "
                                   f"{theme.muted_text}; border-radius: 4px; }}")
            self.setVisible(True)
            self.raise_()

    def eventFilter(self, obj: QObject, ev) -> bool:  # noqa: N802 - Qt's name
        if obj is self._target and ev.type() in (QEvent.Type.Resize, QEvent.Type.Move):
            self._place()
        return False

    def paintEvent(self, ev):  # noqa: N802 - Qt's name
        p = QPainter(self)
        veil = QColor(current_theme().window)
        veil.setAlpha(150)
        p.fillRect(self.rect(), veil)
        p.end()
