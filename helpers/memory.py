"""Peak memory of a call, measured the way each device allows.

On a CUDA GPU, ``torch.cuda.max_memory_allocated`` gives the exact peak of tensor memory.
A CPU has no such counter, so :func:`peak_memory` samples the process's resident set size
(RSS, via ``psutil``) from a background thread while the call runs, and reports the peak above
the RSS just before it. That includes everything the process touched (allocator caches, code,
Python objects), can miss a spike shorter than the sampling interval, and depends on how the
C allocator returns freed memory; on glibc (Linux) freed heap memory is handed back with
``malloc_trim`` before the baseline is read, so the figure is close to the call's own peak.
Compare such numbers on one machine, not across machines.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from helpers.guard import normalize_device

_MIB = 2**20


@dataclass(frozen=True)
class MemoryPeak:
    """How much memory a call needed above what was in use before it.

    ``peak_bytes`` is the peak above ``baseline_bytes``; ``method`` says how it was measured.

    Example:
        >>> peak = MemoryPeak(peak_bytes=3 * 2**20, baseline_bytes=2**30, method="RSS")
        >>> round(peak.peak_mib, 1)
        3.0
    """

    peak_bytes: int
    baseline_bytes: int
    method: str

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / _MIB

    def __str__(self) -> str:
        baseline_mib = self.baseline_bytes / _MIB
        return f"{self.peak_mib:.1f} MiB above a baseline of {baseline_mib:.0f} MiB ({self.method})"


def _release_freed_heap() -> None:
    """Return freed heap memory to the OS where the C library can (glibc's malloc_trim)."""
    gc.collect()
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _rss_peak(fn: Callable[[], Any], calls: int, interval_s: float) -> MemoryPeak:
    try:
        import psutil
    except ImportError as error:  # pragma: no cover - psutil is in requirements.txt
        raise ImportError("peak_memory on a CPU needs psutil (pip install psutil)") from error
    process = psutil.Process()
    _release_freed_heap()
    baseline = process.memory_info().rss
    peak = baseline
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, process.memory_info().rss)
            time.sleep(interval_s)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        for _ in range(calls):
            fn()
            peak = max(peak, process.memory_info().rss)
    finally:
        done.set()
        sampler.join()
    method = f"process RSS sampled every {interval_s * 1e3:g} ms"
    return MemoryPeak(peak_bytes=max(0, peak - baseline), baseline_bytes=baseline, method=method)


def _cuda_peak(fn: Callable[[], Any], calls: int) -> MemoryPeak:
    torch.cuda.synchronize()
    baseline = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    return MemoryPeak(
        peak_bytes=max(0, peak - baseline), baseline_bytes=baseline, method="torch.cuda.max_memory_allocated"
    )


def peak_memory(
    fn: Callable[[], Any],
    *,
    device: str | torch.device | None = "cpu",
    calls: int = 1,
    interval_s: float = 0.0005,
) -> MemoryPeak:
    """Peak memory used while ``fn()`` runs ``calls`` times, above the memory in use before.

    On ``"cuda"``: peak allocated tensor memory (``torch.cuda.max_memory_allocated``). On
    ``"cpu"`` (and ``"mps"``, whose memory is shared with the CPU): peak resident set size of
    this process, sampled every ``interval_s`` seconds (see the module docstring for caveats).
    Call ``fn`` once before measuring, so one-time work (compiling, lazy init) is not counted.

    Example:
        >>> peak = peak_memory(lambda: torch.ones(1024, 1024).sum(), device="cpu")
        >>> peak.peak_bytes >= 0 and "RSS" in peak.method
        True
    """
    if not callable(fn):
        raise TypeError(f"fn must be a zero-argument callable; got {type(fn).__name__}")
    if not isinstance(calls, int) or isinstance(calls, bool) or calls < 1:
        raise ValueError(f"calls must be an int >= 1; got {calls!r}")
    if not isinstance(interval_s, (int, float)) or isinstance(interval_s, bool) or not 0 < interval_s <= 1:
        raise ValueError(f"interval_s must be a number of seconds in (0, 1]; got {interval_s!r}")
    name = normalize_device(device)
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device='cuda' was asked for, but torch.cuda.is_available() is False")
        return _cuda_peak(fn, calls)
    return _rss_peak(fn, calls, float(interval_s))
