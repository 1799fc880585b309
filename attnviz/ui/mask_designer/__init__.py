"""The mask designer's parts: the block-rule grid and its rule chooser, sub-block split controls, the
preset bar, the flash-tile controls with the flash timing, the masks-as-code dialog, and the Qt-free
snapshot of what is shown. The panel that assembles them is
:mod:`attnviz.ui.panels.mask_designer_panel`.
"""
