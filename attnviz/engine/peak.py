"""The CPU's float32 FMA peak, measured: every thread runs :data:`CHAINS` independent chains of vector FMAs
(``acc = acc * A + B`` on ``<LANES x float>``, the engine's own vector width) that stay in registers, enough
chains to cover the FMA latency on every FMA port, so the loop is bound by FMA throughput alone. The rate is two
flops per lane per FMA. ``attnviz-cli bench`` reports flash's rate as a fraction of it: how much of the machine
the kernel uses, whatever a BLAS makes of this CPU. numba's own loops keep such accumulators in memory, so the
chains are written as LLVM vector code, as :mod:`attnviz.engine.microkernel` writes its tile products."""

from __future__ import annotations

import time

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from attnviz.engine.microkernel import LANES
from attnviz.engine.runtime import parallel_section

CHAINS = 16  # independent accumulators: 2 FMA ports x 4 cycles of latency need 8; 16 leave room
FMAS_PER_STEP = 2  # each chain's FMAs per loop step (fewer loop instructions per FMA)
A, B = 0.999999, 1e-7  # the chains' multiplier and addend: the values stay near 1, never denormal or infinite


def _codegen(lanes: int, chains: int):
    def codegen(context, builder, sig, args):
        vec = ir.VectorType(ir.FloatType(), lanes)
        i64 = ir.IntType(64)
        steps = context.cast(builder, args[2], sig.args[2], types.int64)
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec, vec, vec]),
                                             f"llvm.fma.v{lanes}f32")
        a, b = ir.Constant(vec, [A] * lanes), ir.Constant(vec, [B] * lanes)
        pre = builder.block
        loop = builder.append_basic_block("peak.loop")
        done = builder.append_basic_block("peak.done")
        builder.branch(loop)  # at least one step: the callers ask for thousands
        builder.position_at_end(loop)
        i = builder.phi(i64)
        i.add_incoming(ir.Constant(i64, 0), pre)
        accs = []
        for c in range(chains):
            p = builder.phi(vec)
            p.add_incoming(ir.Constant(vec, [1.0 + c / 1024] * lanes), pre)
            accs.append(p)
        new = accs
        for _ in range(FMAS_PER_STEP):
            new = [builder.call(fma, [x, a, b]) for x in new]
        nxt = builder.add(i, ir.Constant(i64, 1))
        i.add_incoming(nxt, loop)
        for p, x in zip(accs, new):
            p.add_incoming(x, loop)
        builder.cbranch(builder.icmp_signed("<", nxt, steps), loop, done)
        builder.position_at_end(done)
        total = new[0]  # the chains' sum is the result, so no FMA can be left out
        for x in new[1:]:
            total = builder.fadd(total, x)
        return builder.extract_element(total, ir.Constant(ir.IntType(32), 0))

    return codegen


@intrinsic
def _chains(typingctx, lanes, chains, steps):
    """Lane 0 of the sum of ``chains`` vector FMA chains after ``steps`` steps (lanes, chains: literals)."""
    if not all(isinstance(x, types.IntegerLiteral) for x in (lanes, chains)):
        return None
    return types.float32(lanes, chains, steps), _codegen(lanes.literal_value, chains.literal_value)


@njit(nogil=True, cache=True)
def chains_sum(steps):
    """What one thread's chains give after ``steps`` steps (lane 0 of their sum), for checking the kernel."""
    return _chains(LANES, CHAINS, steps)


@njit(parallel=True, nogil=True, cache=True)
def _threads(steps, out):
    for t in prange(out.shape[0]):
        out[t] = _chains(LANES, CHAINS, steps)


def fma_peak_gflops(threads: int, seconds: float = 0.25, rounds: int = 3) -> float:
    """The best float32 FMA rate of ``threads`` threads, GFLOP/s: steps grown until a run takes about
    ``seconds`` / 4, then the best of ``rounds`` runs."""
    out = np.zeros(max(1, int(threads)), dtype=np.float32)
    with parallel_section():
        _threads(1000, out)  # compiled (or loaded from the cache) outside the timing
        steps = 1 << 14
        while True:
            t0 = time.perf_counter()
            _threads(steps, out)
            dt = time.perf_counter() - t0
            if dt > seconds / 4 or steps > 1 << 34:
                break
            steps *= 4
        best = dt
        for _ in range(rounds):
            t0 = time.perf_counter()
            _threads(steps, out)
            best = min(best, time.perf_counter() - t0)
    flops = 2.0 * FMAS_PER_STEP * CHAINS * LANES * steps * out.shape[0]
    return flops / best / 1e9
