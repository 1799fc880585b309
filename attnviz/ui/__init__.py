"""The desktop application: the only layer that imports PySide6 and pyqtgraph."""
