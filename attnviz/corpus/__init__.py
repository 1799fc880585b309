"""Attention statistics of a pretrained checkpoint over a whole corpus, computed on Dask.

Qt-free.  Dask (``distributed``) is imported only by :mod:`attnviz.corpus.run` when a run starts, and
pyarrow only when a Parquet file is read or written, so importing this package costs neither.

* :mod:`~attnviz.corpus.stats` — per-head row sums of one document and how they add up (numpy);
* :mod:`~attnviz.corpus.texts` — the corpus streamed as documents (lines, a folder of .txt, Parquet, JSONL);
* :mod:`~attnviz.corpus.worker` — a partition of documents through the checkpoint, on a worker;
* :mod:`~attnviz.corpus.run` — the driver: cluster, partitions in flight, ordered folding, files;
* :mod:`~attnviz.corpus.files` — STATS.parquet and the per-document file, written atomically, read back;
* :mod:`~attnviz.corpus.compare` — one input's statistics beside a corpus's, for the same model.
"""

from attnviz.corpus.files import CorpusStats, StatsFileError, read_stats
from attnviz.corpus.stats import LABELS, STATISTICS, HeadSums, document_sums

__all__ = ["LABELS", "STATISTICS", "CorpusStats", "HeadSums", "StatsFileError", "document_sums", "read_stats"]
