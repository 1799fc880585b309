"""The bench command's plumbing on a tiny problem (no timing claims: those belong in the benchmark)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz.bench import anchors, engine_runs, measure
from attnviz.bench import machine as bench_machine
from attnviz.bench import report as bench_report
from attnviz.cli import bench_cmd
from attnviz.engine import BlockMask, get_num_threads
from attnviz.engine.runtime import max_threads


def test_sparse_tile_mask_empties_about_the_requested_share_and_keeps_every_row_alive():
    mask = anchors.sparse_tile_mask(1000, 64, 128, 0.4, seed=3)
    bmask = BlockMask.from_dense(mask, 64, 128)
    assert bmask.sparsity() == pytest.approx(40.0, abs=2.0)
    assert bmask.counts()["partial"] <= 16  # only ragged edge tiles can be partial
    assert mask.any(axis=1).all() and mask.diagonal().all()


def test_numpy_baseline_matches_the_engine_reference():
    from attnviz.engine import attention

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 50, 8)).astype(np.float32) for _ in range(3))
    mask = np.tri(50, dtype=bool)
    ref = attention(q, k, v, mask, kernel="reference")
    np.testing.assert_allclose(anchors.numpy_attention(q, k, v, mask, 1 / np.sqrt(8)), ref.out, atol=1e-5)


def test_bench_runs_end_to_end_and_reports_every_method(capsys):
    parser = bench_cmd.argparse.ArgumentParser()
    bench_cmd.add_arguments(parser)
    args = parser.parse_args(["--json", "--sizes", "64,130", "--heads", "2", "--hs", "16", "--repeat", "1",
                              "--no-long", "--no-torch", "--threads", "1"])
    assert bench_cmd.handle(args) == 0
    report = json.loads(capsys.readouterr().out)
    methods = {(r["T"], r["mask"], r["method"]) for r in report["rows"]}
    for T in (64, 130):
        for mask in ("dense", "causal", "sparse"):
            assert (T, mask, "flash") in methods and (T, mask, "numpy") in methods
    assert report["sgemm_gflops"] > 0
    assert all(r["ms"] > 0 and 0 <= r["sparsity"] <= 100 and r["peak_mb"] >= 0 for r in report["rows"])
    assert set(report["claims"]) == {"64", "130"}
    assert report["claims"]["130"]["sparse_speedup_over_dense"] > 0
    assert report["config"]["threads"] == 1 and get_num_threads() == max_threads()  # cap restored
    with pytest.raises(SystemExit):
        parser.parse_args(["--sizes", "12,x"])


def test_window_benchmarks_are_run_in_their_own_processes_and_merged(tmp_path):
    """``bench --app``: each window benchmark script runs offscreen in a child process; its JSON lands
    under its key, and a failing script is reported, not raised."""
    import json
    import subprocess

    from attnviz.bench.app_runs import APP_BENCHMARKS, run_app_benchmarks

    calls = []

    def runner(cmd, **kw):
        calls.append((cmd, kw["env"]["QT_QPA_PLATFORM"]))
        script = cmd[1].rsplit("/", 1)[-1]
        if "seed" in cmd:
            return subprocess.CompletedProcess(cmd, 1, "", "Traceback\nRuntimeError: boom")
        return subprocess.CompletedProcess(cmd, 0, json.dumps({"script": script}), "")

    out = run_app_benchmarks(lambda msg: None, runner=runner, folder=tmp_path)
    assert [c[1] for c in calls] == ["offscreen"] * len(APP_BENCHMARKS)
    assert out["startup"] == {"script": "bench_startup.py"}
    assert out["edit_to_pixels_mask"] == {"script": "bench_ui_latency.py"}
    assert "exited 1" in out["edit_to_pixels_seed"]["error"] and "boom" in out["edit_to_pixels_seed"]["error"]


def test_window_benchmarks_need_the_checkout(monkeypatch):
    import attnviz.bench.app_runs as bench

    assert (bench.benchmarks_dir() / "bench_startup.py").is_file()  # found in this checkout
    monkeypatch.setattr(bench, "benchmarks_dir", lambda: None)  # an installed wheel has no benchmarks/
    out = bench.run_app_benchmarks(lambda m: None, runner=None)
    assert list(out) == ["error"] and "benchmarks/" in out["error"]


def test_the_long_run_reports_a_causal_tiled_mask_and_the_overviews():
    cfg = engine_runs.BenchConfig(sizes=(64,), heads=1, hs=16, repeat=1, long_T=2048, overview_sizes=(1024, 2048),
                                overview_pixels=(32, 32))
    report = engine_runs.Report(machine=bench_machine.machine_info(), config={}, sgemm_gflops=1.0)
    said = []
    engine_runs._run_long(cfg, report, said.append)
    lc = report.long_causal
    assert lc["T"] == 2048 and lc["tiles"] == [64, 128]
    assert 45 < lc["sparsity_percent"] < 50  # the causal mask skips about half the tiles
    assert lc["mask_mb"] < lc["dense_mask_mb"] / 4  # only the diagonal's partial tiles are kept
    assert lc["ms"] > 0 and lc["build_ms"] > 0 and lc["overview_max_ms"] > 0
    assert [(o["T"], o["reduce"]) for o in report.overviews] == [(1024, "max"), (1024, "mean"), (2048, "max"),
                                                                   (2048, "mean")]
    assert any("causal (TiledMask" in s for s in said)
    assert "causal as a TiledMask" in bench_report.format_report(report)


def test_sizes_beyond_memory_are_refused_before_anything_is_allocated(capsys, monkeypatch):
    """``bench --sizes 1000000000``: one line naming the size and the memory, exit 1, no traceback."""
    from attnviz.cli import main

    def never(*a, **k):
        raise AssertionError("the benchmark started")

    monkeypatch.setattr(bench_cmd, "run_bench", never)
    assert main(["bench", "--sizes", "256,1000000000", "--no-torch"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "T = 1000000000" in err[0] and "GiB available" in err[0] and "Traceback" not in err[0]


def test_memory_check_counts_the_masks_and_passes_what_fits():
    cfg = engine_runs.BenchConfig(sizes=(4096,), naive=False, torch=False)
    need = engine_runs.bytes_needed(cfg, 4096)
    assert need >= 2 * 4096 * 4096  # the two T x T bool masks at least
    engine_runs.check_memory(cfg, need)  # exactly enough: no error
    engine_runs.check_memory(cfg, None)  # unknown memory: not refused
    with pytest.raises(ValueError, match=r"T = 4096 needs about .* GiB"):
        engine_runs.check_memory(cfg, need - 1)


def test_targets_are_printed_from_paired_ratios_with_the_machine_facts():
    """Each target ratio comes from the rounds' paired calls (not from two separate best times), and the
    text report names the CPU's vector extensions, numba's target CPU, the load and every target."""
    rows = [engine_runs.Row(4096, mask, method, ms, ms, 1.0, 0.0, 0.0, 0.0)
            for mask, method, ms in (("dense", "flash", 100.0), ("dense", "torch_sdpa", 50.0),
                                     ("causal", "flash", 60.0), ("sparse", "flash", 70.0))]
    paired = {"flash_dense_sgemm_fraction": 0.7, "flash_over_sdpa_time_dense": 0.9,
              "flash_over_sdpa_time_causal": 1.2, "flash_over_sdpa_time_sparse": 0.5, "sgemm_gflops_in_rounds": 1.0}
    machine = {**bench_machine.machine_info(), "torch": "x", "torch_cpu_capability": "AVX512",
               "sdpa_backends": {"dense": "FLASH_ATTENTION"}}
    report = engine_runs.Report(machine, {}, 100.0, rows=rows, paired={"4096": paired},
                              load={"start": [1.5, 1, 1], "end": [2.5, 1, 1]})
    report.claims = engine_runs.claims(report)
    assert report.claims["4096"]["flash_over_sdpa_time_dense"] == 0.9  # paired, not 100 / 50
    text = bench_report.format_report(report)
    assert "numba compiles for" in text and "load average (1 min) at the start 1.50, at the end 2.50" in text
    assert "SDPA backend FLASH_ATTENTION" in text
    lines = engine_runs.target_lines(report)
    assert len(lines) == 4
    assert "0.90  target <= 1.00  met" in lines[0] and "1.20  target <= 1.00  MISSED" in lines[1]
    assert "0.50  target <= 0.60  met" in lines[2] and "0.70  target >= 0.65  met" in lines[3]


def test_sdpa_is_called_four_dimensional_on_its_flash_kernel():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 64, 16), dtype=np.float32) for _ in range(3))
    masks = {"dense": None, "causal": np.tri(64, dtype=bool), "sparse": rng.random((64, 64)) < 0.5}
    masks["sparse"][np.arange(64), np.arange(64)] = True
    calls, backends = anchors.sdpa_calls(torch, q, k, v, masks, threads=1)
    from attnviz.engine import attention

    for name, m in masks.items():
        torch.set_num_threads(2)
        out = calls[name]()
        assert torch.get_num_threads() == 1  # each call runs on the bench's threads, whatever ran before
        assert tuple(out.shape) == (1, 2, 64, 16) and backends[name] == "FLASH_ATTENTION"
        np.testing.assert_allclose(out[0].numpy(), attention(q, k, v, m, kernel="reference").out, atol=1e-4)


def test_avx2_environment_turns_off_every_wider_instruction_set():
    host = {"avx2": True, "fma": True, "avx512f": True, "avx512bw": True, "amx-tile": True, "avx10.1": True,
            "avxvnni": True, "sse4.2": True, "cx8": True, "adx": False}
    env = bench_machine.avx2_environment(host, {"PATH": "/bin", "OPENBLAS_L2_SIZE": "1"})
    feats = dict((f[1:], f[0] == "+") for f in env["NUMBA_CPU_FEATURES"].split(","))
    assert feats == {"avx2": True, "fma": True, "avx512f": False, "avx512bw": False, "amx-tile": False,
                     "avx10.1": False, "avxvnni": False, "sse4.2": True, "cx8": True, "adx": False}
    assert env["NUMBA_CPU_NAME"] == "haswell" and env["OPENBLAS_CORETYPE"] == "Haswell"
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert env["ATTNVIZ_BENCH_ISA"] == "avx2" and env["PATH"] == "/bin" and "OPENBLAS_L2_SIZE" not in env


def test_isa_run_restarts_limited_to_avx2_and_reports_it(monkeypatch):
    """--isa avx2 re-runs the same benchmark in a child process whose numba targets AVX2 only: the
    micro-kernel there has 8 lanes and the report names the instruction set."""
    import subprocess
    import sys

    parser = bench_cmd.argparse.ArgumentParser()
    bench_cmd.add_arguments(parser)
    seen = {}
    real_run = subprocess.run

    def fake_run(cmd, env):
        seen["cmd"], seen["env"] = cmd, env
        probe = ("import json; from attnviz.engine.microkernel import LANES; from attnviz.bench import machine;"
                 "print(json.dumps([LANES, machine.machine_info()['isa']]))")
        out = real_run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
        seen["child"] = json.loads(out.stdout)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(bench_cmd.subprocess, "run", fake_run)
    args = parser.parse_args(["--sizes", "64", "--isa", "avx2", "--no-long", "--json"])
    from attnviz.engine.jitcache import host_cpu_features

    if not host_cpu_features().get("avx2"):
        with pytest.raises(ValueError, match="no AVX2"):
            bench_cmd.handle(args)
        return
    assert bench_cmd.handle(args) == 0
    assert seen["child"] == [8, "avx2"]
    assert "--isa" in seen["cmd"] and "--json" in seen["cmd"] and "--no-long" in seen["cmd"]


def test_each_round_times_a_masks_methods_one_after_the_other_and_turns_their_order():
    keys = [("dense", "flash"), ("causal", "flash"), ("sparse", "flash"),
            ("dense", "torch_sdpa"), ("causal", "torch_sdpa"), ("sparse", "torch_sdpa")]
    first = measure.round_order(keys, 0)
    second = measure.round_order(keys, 1)
    assert first == [("dense", "flash"), ("dense", "torch_sdpa"), ("causal", "torch_sdpa"), ("causal", "flash"),
                     ("sparse", "flash"), ("sparse", "torch_sdpa")]
    assert second == [("dense", "torch_sdpa"), ("dense", "flash"), ("causal", "flash"), ("causal", "torch_sdpa"),
                      ("sparse", "torch_sdpa"), ("sparse", "flash")]
    assert sorted(first) == sorted(keys) and sorted(second) == sorted(keys)
    assert measure.round_order([("dense", "flash")], 3) == [("dense", "flash")]  # without torch
