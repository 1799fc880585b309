"""How the parallel kernels run: thread count, one parallel kernel at a time, single-threaded BLAS inside; and
the one place attnviz caps numpy's BLAS threads (:func:`blas_threads` for a block, :func:`cap_blas_threads` for
the rest of a process).

- numba's ``workqueue`` threading layer aborts the process when two threads launch parallel kernels at
  once; every parallel launch therefore holds :data:`PARALLEL_LOCK`.
- The flash kernel calls scipy's BLAS inside ``prange``; a multi-threaded OpenBLAS there runs 3-5x slower
  and may hang, so scipy's (and numpy's) OpenBLAS are limited to one thread for the call.
- :func:`set_num_threads` caps the worker threads of every engine kernel (default: all numba threads);
  :func:`one_thread` caps the kernels one calling thread launches in a block at one thread (a small piece of
  work on a shared machine: a parallel region of a few milliseconds waits for its slowest thread, and on a
  loaded machine that thread is often waiting for a core).
"""

from __future__ import annotations

import contextlib
import os
import threading

import numba
import scipy.linalg.cython_blas  # noqa: F401  loads the BLAS numba's np.dot calls, so threadpoolctl sees it
from threadpoolctl import ThreadpoolController

PARALLEL_LOCK = threading.RLock()

_state = {"threads": None, "controller": None}
_local = threading.local()  # .threads: this thread's own cap (one_thread), else None


def max_threads() -> int:
    """The most worker threads numba can use in this process."""
    return int(numba.config.NUMBA_NUM_THREADS)


def set_num_threads(n: int | None) -> None:
    """Cap the worker threads of engine kernels at n (None: use all of :func:`max_threads`)."""
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"number of threads must be a positive integer or None, got {n!r}")
        n = min(n, max_threads())
    _state["threads"] = n


@contextlib.contextmanager
def num_threads(n: int | None):
    """Apply :func:`set_num_threads` for a block and restore the previous cap afterwards."""
    previous = _state["threads"]
    set_num_threads(n)
    try:
        yield get_num_threads()
    finally:
        _state["threads"] = previous


@contextlib.contextmanager
def one_thread():
    """Within the block, the engine kernels this thread launches use one thread (other threads keep theirs)."""
    previous = getattr(_local, "threads", None)
    _local.threads = 1
    try:
        yield
    finally:
        _local.threads = previous


def get_num_threads() -> int:
    """Worker threads an engine kernel launched from this thread will use."""
    return getattr(_local, "threads", None) or _state["threads"] or max_threads()


def describe() -> dict:
    """Versions and threading facts of the engine's runtime (for reports and benchmarks)."""
    import scipy

    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel has run yet
        layer = "not yet chosen"
    return {"numba": numba.__version__, "scipy": scipy.__version__, "numba_threading_layer": layer,
            "numba_target_cpu": target_cpu(), "max_threads": max_threads(), "threads": get_num_threads()}


def target_cpu() -> str:
    """The CPU numba compiles the kernels for (NUMBA_CPU_NAME, else the host as LLVM names it): its
    LLVM tuning decides, among others, whether AVX-512 code uses 512- or 256-bit vectors."""
    import llvmlite.binding as llvm

    return numba.config.CPU_NAME or llvm.get_host_cpu_name()


def _controller() -> ThreadpoolController:
    if _state["controller"] is None:
        _state["controller"] = ThreadpoolController()
    return _state["controller"]


_blas = {"depth": 0, "limit": None}
_blas_lock = threading.Lock()


@contextlib.contextmanager
def blas_threads(n: int | None):
    """Cap numpy's BLAS at ``n`` threads inside the block (None: leave it alone). On 2-core machines
    numpy's OpenBLAS pool and numba's worker pool fight when their calls alternate (measured 2-4x
    slower GEMMs at two BLAS threads), and the engine kernels are parallel already. Runs on several
    threads share one cap: the first to enter sets it, the last to leave restores the previous one."""
    if n is None:
        yield
        return
    with _blas_lock:
        if _blas["depth"] == 0:
            _blas["limit"] = _controller().limit(limits=int(n), user_api="blas")
        _blas["depth"] += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas["depth"] -= 1
            if _blas["depth"] == 0:
                _blas["limit"].restore_original_limits()
                _blas["limit"] = None


def cap_blas_threads(n: int) -> None:
    """Cap numpy's BLAS at ``n`` threads for the rest of this process (a corpus worker: one BLAS thread per
    worker thread, so workers sharing a machine do not oversubscribe it)."""
    _controller().limit(limits=int(n), user_api="blas")


@contextlib.contextmanager
def parallel_section():
    """Hold the parallel lock, apply the thread cap and keep BLAS single-threaded for a kernel launch."""
    with PARALLEL_LOCK:
        numba.set_num_threads(get_num_threads())
        # prange gives each thread one contiguous share of the iterations, whatever
        # numba.set_parallel_chunksize says (measured with the omp and workqueue layers): kernels whose
        # items differ in cost order them for that (attnviz.engine.flash.work_order)
        with _controller().limit(limits=1, user_api="blas"):
            yield


def available_memory() -> int | None:
    """Bytes the system can still give this process without swapping (Linux MemAvailable), else None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def process_memory(key: str) -> int:
    """Bytes of a /proc/self/status memory line of this process ("VmRSS:", "VmHWM:", "RssAnon:", ...);
    OSError where there is no such line."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise OSError(key)
