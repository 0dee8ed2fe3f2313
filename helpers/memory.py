"""Memory of a call: its peak, one method per device, and the activations it saves for backward.

:func:`peak_memory` counts the bytes torch's allocator hands out while a call runs, the way
each device allows, so that figures from notebooks 02 and 07 mean the same thing:

- CUDA: ``torch.cuda.max_memory_allocated`` after resetting the peak.
- MPS: ``torch.mps.current_allocated_memory``, sampled from a background thread (torch keeps
  no peak counter for MPS), with the device synchronized before and after.
- CPU: the allocation and free events ``torch.profiler`` records with ``profile_memory=True``,
  summed in time order (torch keeps no allocation statistics for the CPU). Only tensor memory
  counts; memory the process uses otherwise (code, Python objects) does not.

Everything a call allocates and keeps (CUDA graph pools, frozen weights, caches) is in
``retained_bytes``: measure a compiled function's first call to include what compiling keeps, and
a later call for the steady state. With CUDA graphs (``mode="reduce-overhead"``, ``"max-autotune"``)
the first call warms up, the second records the graphs and later calls replay them, allocating
nothing (``torch/_inductor/cudagraph_trees.py``): measure the second call to see the graphs' memory.
:func:`saved_activations` counts what a forward pass keeps alive for the backward pass (the memory
``torch.compile`` can shrink by recomputing).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from helpers.device import normalize_device, synchronize
from helpers.logs import native_stderr_discarded

_MIB = 2**20

#: How :func:`peak_memory` measures on each device (shown in ``MemoryPeak.method``).
METHODS = {
    "cuda": "torch.cuda.max_memory_allocated",
    "mps": "torch.mps.current_allocated_memory, sampled",
    "cpu": "torch.profiler allocation events",
}


@dataclass(frozen=True)
class MemoryPeak:
    """How much tensor memory a call needed above what was allocated before it, and kept after it.

    ``peak_bytes``: the peak above the memory allocated before the call; ``retained_bytes``: what
    was still allocated after it (above the same point); ``method``: how it was measured.

    Example:
        >>> peak = MemoryPeak(peak_bytes=3 * 2**20, retained_bytes=2**20, method="cpu")
        >>> print(peak)
        peak 3.0 MiB, 1.0 MiB kept after the call (cpu)
    """

    peak_bytes: int
    retained_bytes: int
    method: str

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / _MIB

    @property
    def retained_mib(self) -> float:
        return self.retained_bytes / _MIB

    def __str__(self) -> str:
        return (
            f"peak {self.peak_mib:.1f} MiB, {self.retained_mib:.1f} MiB kept after the call ({self.method})"
        )


def peak_memory(
    fn: Callable[[], Any], *, device: str | torch.device | None = "cpu", calls: int = 1
) -> MemoryPeak:
    """Peak tensor memory while ``fn()`` runs ``calls`` times, above what was allocated before.

    One method per device (see the module docstring), the same in every notebook.

    Example:
        >>> peak = peak_memory(lambda: torch.ones(1024, 1024).sum())  # a 4 MiB temporary
        >>> peak.peak_bytes >= 4 * 2**20, peak.retained_bytes
        (True, 0)
    """
    if not callable(fn):
        raise TypeError(f"fn must be a zero-argument callable; got {type(fn).__name__}")
    if not isinstance(calls, int) or isinstance(calls, bool) or calls < 1:
        raise ValueError(f"calls must be an int >= 1; got {calls!r}")
    name = normalize_device(device)
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device='cuda' was asked for, but torch.cuda.is_available() is False")
        return _cuda_peak(fn, calls)
    if name == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError("device='mps' was asked for, but torch.backends.mps.is_available() is False")
        return _mps_peak(fn, calls)
    return _cpu_peak(fn, calls)


def _cuda_peak(fn: Callable[[], Any], calls: int) -> MemoryPeak:
    synchronize("cuda")
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(calls):
        fn()
    synchronize("cuda")
    peak, after = torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated()
    return MemoryPeak(max(0, peak - before), max(0, after - before), METHODS["cuda"])


def _mps_peak(fn: Callable[[], Any], calls: int, interval_s: float = 0.0005) -> MemoryPeak:
    synchronize("mps")
    before = peak = torch.mps.current_allocated_memory()
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, torch.mps.current_allocated_memory())
            time.sleep(interval_s)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        for _ in range(calls):
            fn()
            synchronize("mps")
            peak = max(peak, torch.mps.current_allocated_memory())
    finally:
        done.set()
        sampler.join()
    after = torch.mps.current_allocated_memory()
    return MemoryPeak(max(0, peak - before), max(0, after - before), METHODS["mps"])


def _cpu_peak(fn: Callable[[], Any], calls: int) -> MemoryPeak:
    from torch.profiler import ProfilerActivity, profile

    with native_stderr_discarded():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            for _ in range(calls):
                fn()
    events = []
    pending = list(prof.profiler.kineto_results.experimental_event_tree())
    allocation = torch._C._profiler._EventType.Allocation
    while pending:
        event = pending.pop()
        if event.tag == allocation and event.extra_fields.device.type == "cpu":
            events.append((event.start_time_ns, event.extra_fields.alloc_size))  # negative: a free
        pending.extend(event.children)
    running = peak = 0
    for _, size in sorted(events):
        running += size
        peak = max(peak, running)
    return MemoryPeak(peak, max(0, running), METHODS["cpu"])


@dataclass(frozen=True)
class SavedTensors:
    """Tensors a forward pass saved for the backward pass: how many, and their bytes.

    Example:
        >>> print(SavedTensors(count=3, nbytes=3 * 2**20))
        3 tensors, 3.0 MiB
    """

    count: int
    nbytes: int

    @property
    def mib(self) -> float:
        return self.nbytes / _MIB

    def __str__(self) -> str:
        return f"{self.count} tensors, {self.mib:.1f} MiB"


def saved_activations(fn: Callable[[], Any], *, exclude: Iterable[torch.Tensor] = ()) -> SavedTensors:
    """Run ``fn()`` and count the tensors autograd saved for the backward pass while it ran.

    Uses ``torch.autograd.graph.saved_tensors_hooks``, which sees what eager autograd
    saves and what a compiled (AOTAutograd) function saves alike. Tensors are counted once
    per storage; storages of ``exclude`` (typically ``model.parameters()``, which exist
    anyway) are left out, so what remains is activation memory. Run only the forward in
    ``fn`` and call ``backward()`` afterwards (the saved tensors are freed by it).

    Example:
        >>> x = torch.randn(1000, requires_grad=True)
        >>> saved = saved_activations(lambda: torch.sin(x).cos().sum(), exclude=[x])
        >>> saved.count, saved.nbytes
        (1, 4000)
    """
    if not callable(fn):
        raise TypeError(f"fn must be a zero-argument callable; got {type(fn).__name__}")
    try:
        skip = {t.untyped_storage().data_ptr() for t in exclude}
    except (TypeError, AttributeError) as error:
        raise ValueError("exclude must be an iterable of tensors (e.g. model.parameters())") from error
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in skip:
            seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn()
    return SavedTensors(count=len(seen), nbytes=sum(seen.values()))
