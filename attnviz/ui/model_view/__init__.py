"""The "Pretrained model" views: a real checkpoint's attention, every layer and head
(:mod:`~attnviz.ui.model_view.panel`), with the head-summary grid, the ViT overlay, the decoder
views and a corpus's statistics beside the input. What they hold and draw is computed without Qt in
:mod:`attnviz.checkpoints.study` and :mod:`attnviz.checkpoints.views`.
"""
