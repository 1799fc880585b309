"""attnviz: a desktop laboratory for the attention mechanism.

Layers (arrows point down only): ui -> persist -> model -> sources | engine.
``engine`` is numpy + numba, ``sources`` numpy + Pillow + tokenizers, ``model`` the Qt-free domain,
``persist`` the session files, ``ui`` the only place that imports Qt or pyqtgraph.
"""

__version__ = "0.1.0"


def show(attentions, tokens, **options):
    """Open the desktop application on attention maps computed elsewhere; see :func:`attnviz.api.show`."""
    from attnviz.api import show as _show

    return _show(attentions, tokens, **options)


def save(path, attentions, tokens, **options):
    """Write attention maps to a file ``attnviz PATH`` opens; see :func:`attnviz.api.save`."""
    from attnviz.api import save as _save

    return _save(path, attentions, tokens, **options)
