"""The "Pretrained model" views: a real checkpoint's attention, every layer and head.

What they hold and draw is computed without Qt in :mod:`attnviz.checkpoints.study` (the checkpoint,
its inputs and the run shown) and :mod:`attnviz.checkpoints.views` (the arrays drawn).

* :mod:`~attnviz.ui.model_view.jobs` — which problems of a load or forward pass are the person's;
* :mod:`~attnviz.ui.model_view.summary_view` — :class:`HeadSummaryView`, layers x heads grid of one statistic;
* :mod:`~attnviz.ui.model_view.vit_view` — :class:`VitAttentionView`, class-token attention / rollout over the image;
* :mod:`~attnviz.ui.model_view.corpus_view` — :class:`CorpusStatsView`, a corpus's STATS.parquet beside the input;
* :mod:`~attnviz.ui.model_view.panel` — :class:`ModelViewPanel`, all of it in one panel.
"""
