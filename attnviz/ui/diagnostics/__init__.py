"""The diagnostics views of the Q/K/V inspector and of the Diagnostics panel: each module draws the
numbers of one ``attnviz.model.diagnostics`` study for the current session.

- ``common``: number formatting, the selected head, themed plots, table helpers, session-event wiring;
- ``tab``: the lazily refreshed base of every diagnostics tab;
- ``breakdown_view`` and ``qk_scatter``: the inspector's (query, key) breakdown tables and Q-K PCA;
- ``normalisation``, ``jacobian``, ``positional``, ``permutation``, ``flash_check``, ``alignment``,
  ``variants``: one tab each of the Diagnostics panel;
- ``model_alignment``: the Alignment tab's view of a real translation model's cross-attention, fed by the
  Pretrained panel through the window's AlignmentFeed.
"""
