"""Attention statistics of a pretrained checkpoint over a whole corpus, computed on Dask.

Qt-free; Dask is imported only when a run starts (:mod:`.run`) and pyarrow only when a Parquet file
is read or written, so importing this package costs neither. Modules: ``stats`` (sums, numpy),
``texts`` (streamed documents), ``worker``, ``run`` (the driver), ``files`` (STATS.parquet), ``compare``.
"""

from attnviz.corpus.files import CorpusStats, StatsFileError, read_stats
from attnviz.corpus.stats import LABELS, STATISTICS, HeadSums, document_sums

__all__ = ["LABELS", "STATISTICS", "CorpusStats", "HeadSums", "StatsFileError", "document_sums", "read_stats"]
