"""The Qt-free domain: session state, the commands that edit it, positional encodings, heads, score
rules and the compute pipeline with its caches; in sub-packages the mask designer's model
(:mod:`attnviz.model.mask`), what the views draw (:mod:`attnviz.model.display`) and the numbers
behind the diagnostics (:mod:`attnviz.model.diagnostics`). Imports engine and sources only, so all
of it is tested without a QApplication.
"""
