"""The benchmark harness behind ``attnviz-cli bench``: the machine's facts (CPU, vector extensions, the
instruction-set restart), timing and peak-memory measurement, the anchors the engine is compared with
(numpy's sgemm, plain numpy attention, torch SDPA when torch is importable), the engine's runs and their
report, and the window benchmarks of the checkout's ``benchmarks/`` folder. Qt-free; torch is imported only
when a run asks for its anchors. The CLI (:mod:`attnviz.cli.bench_cmd`) only parses arguments and prints."""
