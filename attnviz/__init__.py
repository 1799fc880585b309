"""attnviz: a desktop laboratory for the attention mechanism.

Layers (arrows point down only): ui -> persist -> model -> sources | engine.
``engine`` is numpy + numba, ``sources`` numpy + Pillow + tokenizers, ``model`` the Qt-free domain,
``persist`` the session files, ``ui`` the only place that imports Qt or pyqtgraph.
"""

__version__ = "0.1.0"
