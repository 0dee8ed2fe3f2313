"""Boilerplate for notebook 07 (training): a GPT-2 that can be trained reproducibly, and memory.

``training_gpt2`` builds the course's GPT-2 with dropout off (so eager and compiled training
can be compared step by step) in train mode. ``saved_activations`` counts what the forward
pass keeps alive for the backward pass (the memory ``torch.compile`` can shrink by
recomputing cheap operations), and ``peak_memory_bytes`` measures the peak memory of one
call: ``torch.cuda.max_memory_allocated`` on a GPU, the profiler's allocation events on a CPU.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from helpers.guard import normalize_device
from helpers.models import GPT2Size, _quiet_transformers, gpt2_config


def training_gpt2(size: GPT2Size, *, device: str | torch.device | None = "cpu", seed: int = 0):
    """A ``GPT2LMHeadModel`` for ``size`` with every dropout at 0, in train mode on ``device``.

    Dropout draws random numbers, and compiled code draws them differently from eager code,
    so losses could not be compared step by step with it on. The weights depend only on
    ``seed``: two calls give two identical, independent models.

    Example:
        >>> from helpers.models import gpt2_size
        >>> tiny = gpt2_size("cpu", n_layer=1, n_embd=32, n_head=2, vocab_size=64, seq_len=8)
        >>> model = training_gpt2(tiny)
        >>> model.training, model.config.resid_pdrop, model.config.attn_pdrop
        (True, 0.0, 0.0)
    """
    if not isinstance(size, GPT2Size):
        raise ValueError(
            f"size must be a GPT2Size (see helpers.models.gpt2_size()); got {type(size).__name__}"
        )
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int; got {seed!r}")
    name = normalize_device(device)
    config = gpt2_config(size)
    config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = 0.0
    with _quiet_transformers(), torch.random.fork_rng(devices=[]):
        from transformers import GPT2LMHeadModel

        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
    # transformers picks the loss from the class name; "GPT2LMHeadModel" matches none, so it
    # would warn once and use the causal-LM loss. Name that loss explicitly instead.
    model.loss_type = "ForCausalLM"
    return model.train().to(name)


@dataclass(frozen=True)
class SavedTensors:
    """Tensors a forward pass saved for the backward pass: how many, and their bytes.

    Example:
        >>> SavedTensors(count=3, nbytes=3 * 2**20).megabytes
        3.0
    """

    count: int
    nbytes: int

    @property
    def megabytes(self) -> float:
        return self.nbytes / 2**20

    def __str__(self) -> str:
        return f"{self.count} tensors, {self.megabytes:.1f} MB"


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
        raise ValueError(f"fn must be a zero-argument callable; got {type(fn).__name__}")
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


def peak_memory_bytes(fn: Callable[[], Any], *, device: str | torch.device | None = "cpu") -> int:
    """Peak bytes allocated on ``device`` while ``fn()`` ran, above what was allocated before.

    On CUDA: ``torch.cuda.max_memory_allocated`` after resetting the peak. Elsewhere (CPU,
    where torch keeps no allocation statistics): the allocation and free events recorded by
    ``torch.profiler`` with ``profile_memory=True``, summed in time order; run ``fn`` once
    before (warm-up) so that one-off allocations do not count. The profiler's own log
    lines (written by C++ to file descriptor 2) are discarded while it records.

    Example:
        >>> peak_memory_bytes(lambda: torch.ones(1024, 1024).sum()) >= 4 * 1024 * 1024
        True
    """
    if not callable(fn):
        raise ValueError(f"fn must be a zero-argument callable; got {type(fn).__name__}")
    name = normalize_device(device)
    if name == "cuda" and torch.cuda.is_available():
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    from torch.profiler import ProfilerActivity, profile

    with _native_stderr_discarded():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
    events = []
    pending = list(prof.profiler.kineto_results.experimental_event_tree())
    allocation = torch._C._profiler._EventType.Allocation
    while pending:
        event = pending.pop()
        if event.tag == allocation and event.extra_fields.device.type == name:
            events.append((event.start_time_ns, event.extra_fields.alloc_size))
        pending.extend(event.children)
    running = peak = 0
    for _, size in sorted(events):
        running += size
        peak = max(peak, running)
    return peak


@contextlib.contextmanager
def _native_stderr_discarded() -> Iterator[None]:
    """Send what C++ code writes to file descriptor 2 to the null device, then restore it."""
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 (e.g. some embedded interpreters): nothing to hide
        yield
        return
    sys.stderr.flush()
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
