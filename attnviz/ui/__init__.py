"""The desktop application, the only layer that imports PySide6 and pyqtgraph: the window (``app``,
``main_window``, ``context``, ``compute_controller``) with its sidebar and ``workspaces``, the
``panels`` they show, reusable ``widgets``, and the parts of the larger panels (``mask_designer``,
``diagnostics``, ``model_view``). What these draw is computed without Qt in :mod:`attnviz.model`.
"""
