"""The Inputs panel's editors, one module per kind of token source: ``text_editor`` (text and its tokens as
chips), ``image_editor`` (an image and its patches), ``custom_editor`` (a block of robot state, actions or
noise), ``toy_editor`` (hand-set tokens), ``source_tree`` (the sources list with drag-to-reorder) and
``common`` (what they share). :mod:`attnviz.ui.panels.inputs_panel` puts them together; each editor is
built with that panel, whose ``ctx`` it edits through and whose ``prompts`` it asks for files."""
