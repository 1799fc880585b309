"""What the benchmark reports about the machine: the CPU, its vector extensions, library versions and
threading, and the environment of a run limited to AVX2 (``--isa avx2``)."""

from __future__ import annotations

import os
import platform

import numpy as np

ISA_MARKER = "ATTNVIZ_BENCH_ISA"  # set in the restarted process of --isa


VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve")


def cpu_flags() -> list[str]:
    """The vector extensions of this CPU among VECTOR_FLAGS (from /proc/cpuinfo; empty when unknown)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    have = set(line.split(":", 1)[1].split())
                    return [flag for flag in VECTOR_FLAGS if flag in have]
    except OSError:
        pass
    return []


def machine_info(torch=None) -> dict:
    """CPU, its vector extensions and the CPU numba compiles for, cores, library versions, torch's CPU
    kernel level, what computes flash's float32 tile products, and the OpenBLAS variables in force."""
    from attnviz.engine.microkernel import LANES, enabled as microkernel_enabled
    from attnviz.engine.runtime import describe

    extra = {}
    if torch is not None:
        extra = {"torch": torch.__version__, "torch_threads": torch.get_num_threads()}
        try:
            extra["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        except AttributeError:
            pass

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "vector_extensions": cpu_flags(),
        "logical_cpus": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        **describe(),
        "flash_tile_products": (f"micro-kernel ({'AVX-512' if LANES == 16 else 'AVX2'})" if microkernel_enabled() else "OpenBLAS"),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE"),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
        "isa": os.environ.get(ISA_MARKER) or "native",
        **extra,
    }


def quiet_openmp() -> None:
    """Let idle OpenMP workers sleep instead of spinning (before any parallel kernel starts them).

    numba's omp layer and torch each keep an OpenMP pool; spinning workers of one method steal the
    cores of the next method timed. Only affects this process.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def avx2_environment(host_features: dict[str, bool], env: dict[str, str]) -> dict[str, str]:
    """``env`` for a run of the AVX2 code paths on this CPU: numba's target is the host without any
    AVX-512, AMX or AVX10 feature; OpenBLAS, torch (ATen), oneDNN and MKL are told AVX2."""
    wide = ("avx512", "amx", "avx10", "evex512", "avxvnni", "avxifma", "avxneconvert", "egpr", "apx")
    feats = ",".join(("+" if on and not name.startswith(wide) else "-") + name
                     for name, on in sorted(host_features.items()))
    out = {k: v for k, v in env.items() if k not in ("OPENBLAS_L2_SIZE",)}
    out.update(NUMBA_CPU_NAME="haswell", NUMBA_CPU_FEATURES=feats, OPENBLAS_CORETYPE="Haswell",
               ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2", MKL_ENABLE_INSTRUCTIONS="AVX2")
    out[ISA_MARKER] = "avx2"
    return out
