"""Greedy decoding with a static KV cache, and what one decoding step costs in memory traffic.

The boilerplate behind notebooks 08 and 09; the lesson (the decoding step and its
``torch.compile(..., fullgraph=True)``) stays in the notebooks:

- :func:`generate_static`: eager prefill, then a step function of yours once per new token,
  with one ``StaticCache`` that can be reused across requests (``reset()``, same addresses).
- :func:`position_inputs`: where the new token goes, in the arguments the installed
  transformers expects (``cache_position`` on 4.x, only ``position_ids`` on 5.x).
- :func:`decode_step_bytes`: the bytes one single-token step reads, by component.
- :func:`last_level_cache_bytes`, :func:`working_set_past_cache`,
  :func:`reader` and :func:`read_bandwidth_gb_s`: the machine's side of the bandwidth bound.
- :func:`timed_against_reads` and :func:`bound_table`: decoding requests timed between reads of
  their steps' bytes (:class:`RingReads`), and each one's share of that read bound (notebook 09).
- :func:`split_step_time` and :func:`profiled_split`: a profiled step's time split into matrix
  products, fused elementwise kernels, attention and overhead, and :func:`what_holds_it_back`:
  which of them holds a step back from its read bound (notebook 09).

A step function has the signature ``step(model, token, cache, positions) -> next_token``:
``token`` is ``(batch, 1)``, ``positions`` the dictionary from :func:`position_inputs`, and
it returns the next token ids, ``(batch, 1)``.
"""

from __future__ import annotations

import inspect
import os
import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from IPython.display import Markdown

from helpers import bench
from helpers.bench import Timing, time_call
from helpers.counters import CompileCounts
from helpers.device import normalize_device, synchronize, thread_count
from helpers.logs import native_stderr_discarded
from helpers.tables import markdown_table

#: A decoding step: ``step(model, token, cache, positions) -> next token ids (batch, 1)``.
Step = Callable[[Any, torch.Tensor, Any, Mapping[str, torch.Tensor]], torch.Tensor]

_SYS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
_SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}

#: How :func:`decode_step_bytes` counts each component (printed by :func:`describe_step_bytes`).
STEP_BYTES_RULES = {
    "blocks": "every weight of the transformer blocks, read once",
    "final_norm": "the final layer norm",
    "lm_head": "the whole output projection (vocabulary x width), read once",
    "wte_row": "one row of the token embedding per sequence (a lookup, not the table)",
    "wpe_row": "one row of the position embedding per sequence",
    "kv_cache": "keys and values of every layer at the positions attention reads",
}


def last_level_cache_bytes(device: str | torch.device | None = "cpu") -> int | None:
    """The size of the last-level cache in bytes, or ``None`` where it cannot be read.

    On a CPU: the highest-level data or unified cache of CPU 0 in
    ``/sys/devices/system/cpu/cpu0/cache`` (Linux), else ``os.sysconf`` (L3, then L2) where
    the C library reports it. That is one cache instance, the part a core can use: CPUs
    built from several chiplets have one such cache per chiplet. On an NVIDIA GPU: its L2
    cache (``torch.cuda.get_device_properties``). On MPS: ``None`` (not reported).

    Example:
        >>> size = last_level_cache_bytes()
        >>> size is None or size > 0
        True
    """
    name = normalize_device(device)
    if name == "cuda":
        if not torch.cuda.is_available():
            return None
        size = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)
        return int(size) or None
    if name == "mps":
        return None
    return _sys_cache_bytes() or _sysconf_cache_bytes()


def _parse_size(text: str) -> int | None:
    text = text.strip().upper().removesuffix("B")
    unit = text[-1:] if text[-1:] in _SIZE_UNITS else ""
    number = text[: len(text) - len(unit)]
    return int(number) * _SIZE_UNITS[unit] if number.isdigit() else None


def _sys_cache_bytes(root: Path = _SYS_CACHE) -> int | None:
    best: tuple[int, int] | None = None
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip() if (index / "type").exists() else "Unified"
            size = _parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or not size:
            continue
        if best is None or level > best[0]:
            best = (level, size)
    return best[1] if best else None


def _sysconf_cache_bytes() -> int | None:
    for key in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        if key in getattr(os, "sysconf_names", {}):
            try:
                size = os.sysconf(key)
            except (OSError, ValueError):
                continue
            if size and size > 0:
                return int(size)
    return None


def working_set_past_cache(
    factor: int = 4, *, device: str | torch.device | None = "cpu", minimum: int = 256 * 2**20
) -> int:
    """A working-set size in bytes that does not fit the last-level cache: ``factor`` times it.

    At least ``minimum`` bytes; where the cache size is unknown, ``4 * minimum``. Pass it to
    :func:`read_bandwidth_gb_s` to measure the memory (DRAM) bandwidth, not the cache's.

    Example:
        >>> working_set_past_cache(minimum=2**20) >= 4 * (last_level_cache_bytes() or 2**20)
        True
    """
    for label, value in (("factor", factor), ("minimum", minimum)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{label} must be a positive int; got {value!r}")
    cache = last_level_cache_bytes(device)
    if cache is None:
        return 4 * minimum
    mib = 2**20
    return max(minimum, -(-factor * cache // mib) * mib)  # rounded up to whole MiB


def _check_read_args(n_bytes: int, threads: int | None) -> None:
    if not isinstance(n_bytes, int) or isinstance(n_bytes, bool) or n_bytes < 4:
        raise ValueError(f"n_bytes must be an int >= 4 (the bytes to read); got {n_bytes!r}")
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
        raise ValueError(f"threads must be a positive int or None (keep torch's setting); got {threads!r}")


def reader(n_bytes: int, device: str | torch.device | None = "cpu") -> Callable[[], torch.Tensor]:
    """A zero-argument callable that reads ``n_bytes`` once: a sum over a preallocated float32 buffer.

    A sum reads its input and writes one number, so its GB/s is read bandwidth, what a decoding
    step mostly needs (a copy also writes as much as it reads). Allocating the buffer here keeps
    allocation and first-touch page faults out of any timing. Time it interleaved with other work
    (``helpers.bench.compare``), or through :func:`read_bandwidth_gb_s`.

    Example:
        >>> read = reader(2**20)
        >>> float(read())  # 262,144 float32 ones
        262144.0
    """
    _check_read_args(n_bytes, None)
    return torch.ones(n_bytes // 4, device=normalize_device(device)).sum


@dataclass(frozen=True)
class ReadBandwidth:
    """A read's bandwidth: ``gb_s`` over a buffer of ``n_bytes`` with ``threads`` CPU threads
    (``None`` for a GPU's read, which CPU threads do not run).

    Example:
        >>> from helpers.bench import Timing
        >>> print(ReadBandwidth(gb_s=20.0, n_bytes=2**27, threads=1, timing=Timing("read", (0.0067,))))
        read of a 128 MiB buffer, 1 thread(s): 20.0 GB/s (median of 1)
    """

    gb_s: float
    n_bytes: int
    threads: int | None
    timing: Timing

    def __str__(self) -> str:
        where = "" if self.threads is None else f", {self.threads} thread(s)"
        return (
            f"read of a {self.n_bytes / 2**20:,.0f} MiB buffer{where}: "
            f"{self.gb_s:.1f} GB/s (median of {self.timing.n})"
        )


def read_bandwidth_gb_s(
    n_bytes: int,
    device: str | torch.device | None = "cpu",
    *,
    threads: int | None = None,
    warmup: int = 2,
    rounds: int = 10,
) -> ReadBandwidth:
    """Measure read bandwidth over a buffer of ``n_bytes`` (:func:`reader`): bytes / median seconds.

    Where the buffer fits the last-level cache, this is the cache's bandwidth; size it with
    :func:`working_set_past_cache` for the memory's. ``threads`` sets torch's CPU thread count for
    the measurement (then restores it).

    Example:
        >>> result = read_bandwidth_gb_s(2**20, rounds=3)
        >>> result.gb_s > 0, result.n_bytes, result.timing.n
        (True, 1048576, 3)
    """
    _check_read_args(n_bytes, threads)
    name = normalize_device(device)
    with thread_count(threads):
        read = reader(n_bytes, name)
        timing = time_call(read, name="read", device=name, warmup=warmup, rounds=rounds)
        used = torch.get_num_threads() if name == "cpu" else None
    n_read = n_bytes // 4 * 4
    return ReadBandwidth(gb_s=n_read / timing.median / 1e9, n_bytes=n_read, threads=used, timing=timing)


@dataclass(frozen=True)
class Recipe:
    """A way to serve decoding requests, for :func:`timed_against_reads`.

    ``request()`` runs one request and returns its decoding steps' seconds (a
    :class:`Generation`'s ``step_s``); ``n_bytes`` is what one step reads
    (:func:`decode_step_bytes`); ``threads`` is torch's CPU thread count for the request and for
    its read (``None``: unchanged, as on a GPU).

    Example:
        >>> Recipe(lambda: (0.002, 0.002), n_bytes=2**20, threads=1).n_bytes
        1048576
    """

    request: Callable[[], Sequence[float]]
    n_bytes: int
    threads: int | None = None

    def __post_init__(self) -> None:
        if not callable(self.request):
            raise TypeError(
                "request must be callable with no arguments, returning the steps' seconds; "
                f"got {type(self.request).__name__}"
            )
        _check_read_args(self.n_bytes, self.threads)


@dataclass(frozen=True)
class ShareOfBound:
    """A recipe's decoding speed against its read bound, over the rounds of :func:`timed_against_reads`.

    ``tokens_s``: 1 / the median over rounds of each request's median step. ``spread``: those
    per-round step medians' range over their median. ``gb_s``: the step's bytes over its time
    (median over rounds). ``bound_gb_s``: the read of the same bytes at the same thread count
    (median over rounds), ``bound_spread`` its range over its median. ``share``: the median of
    the round-by-round ratio ``gb_s / bound_gb_s``, ``share_range`` its lowest and highest.

    Example:
        >>> r = ShareOfBound(500.0, 0.02, 10.0, 20.0, 0.05, 0.5, (0.45, 0.55))
        >>> f"{r.tokens_s:.0f} tokens/s, {r.share:.0%} of the bound"
        '500 tokens/s, 50% of the bound'
    """

    tokens_s: float
    spread: float
    gb_s: float
    bound_gb_s: float
    bound_spread: float
    share: float
    share_range: tuple[float, float]


def _relative_range(values: Sequence[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


class RingReads:
    """Reads of any size from one float32 buffer, each starting where the previous one ended.

    Every bound then reads the same memory. Separately allocated buffers can read at rates that
    differ by more than their rounds' spread: on the 2-core cloud machine that runs this course's
    CI, four buffers read 15.5 to 18.2 GB/s at 1 thread, reproducibly, and one buffer's prefixes
    18.6 to 19.0, since where a buffer's pages lie is the machine's affair. Here a placement effect
    becomes round-to-round spread instead of a fixed bias, and no read starts on bytes the previous
    read left in the cache: the buffer holds twice the largest read.

    Example:
        >>> ring = RingReads(max_bytes=64)  # 16 float32 elements, 32 in the ring
        >>> [ring.spans(48), ring.spans(64), ring.spans(32)]  # (start, stop) element ranges
        [[(0, 12)], [(12, 28)], [(28, 32), (0, 4)]]
    """

    def __init__(self, max_bytes: int, device: str | torch.device | None = "cpu"):
        _check_read_args(max_bytes, None)
        self.buffer = torch.ones(2 * (max_bytes // 4), device=normalize_device(device))
        self.position = 0

    def spans(self, n_bytes: int) -> list[tuple[int, int]]:
        """The element ranges the next read of ``n_bytes`` covers (two where it wraps); advances."""
        _check_read_args(n_bytes, None)
        size, count = self.buffer.numel(), n_bytes // 4
        if count > size // 2:
            raise ValueError(f"n_bytes must be at most the ring's max_bytes ({size // 2 * 4}); got {n_bytes}")
        start, stop = self.position, self.position + count
        self.position = stop % size
        return [(start, stop)] if stop <= size else [(start, size), (0, stop - size)]

    def read(self, n_bytes: int) -> None:
        """Read ``n_bytes`` of the ring (a sum), from where the previous read ended."""
        for start, stop in self.spans(n_bytes):
            self.buffer[start:stop].sum()


def timed_against_reads(
    recipes: Mapping[Hashable, Recipe],
    *,
    device: str | torch.device | None = "cpu",
    rounds: int = 5,
    past_cache_bytes: int | None = None,
) -> tuple[dict[Hashable, ShareOfBound], dict[int | None, float]]:
    """Each recipe's requests timed between reads of its steps' bytes, and its share of that bound.

    One :func:`helpers.bench.compare` run interleaves every recipe's request with a read (a sum,
    from one :class:`RingReads` buffer for all reads) of each recipe's ``n_bytes`` at its
    ``threads``, ``rounds`` times, so that the steps and their bound share the machine's state;
    shares are taken round by round. With ``past_cache_bytes`` (see
    :func:`working_set_past_cache`), a read that size runs at each thread count too: the memory's
    bandwidth, returned second (GB/s by thread count; empty without it). No warm-up call: run
    (and compile) each request once before.

    Example:
        >>> recipes = {"slow": Recipe(lambda: (0.004,), 2**20), "fast": Recipe(lambda: (0.002,), 2**20)}
        >>> results, memory = timed_against_reads(recipes, rounds=2)
        >>> results["fast"].tokens_s, memory
        (500.0, {})
    """
    if not isinstance(recipes, Mapping) or not recipes:
        raise ValueError("recipes must be a non-empty mapping of key -> Recipe")
    for key, recipe in recipes.items():
        if not isinstance(recipe, Recipe):
            raise TypeError(f"recipes[{key!r}] must be a Recipe; got {type(recipe).__name__}")
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise ValueError(f"rounds must be a positive int; got {rounds!r}")
    if past_cache_bytes is not None:
        _check_read_args(past_cache_bytes, None)
    name = normalize_device(device)
    thread_counts = {recipe.threads for recipe in recipes.values()}
    reads = {(recipe.n_bytes, recipe.threads) for recipe in recipes.values()}
    if past_cache_bytes is not None:
        reads |= {(past_cache_bytes, threads) for threads in thread_counts}
    step_medians: dict[Hashable, list[float]] = {key: [] for key in recipes}

    def request(key: Hashable) -> Callable[[], None]:
        def run() -> None:
            with thread_count(recipes[key].threads):
                steps = recipes[key].request()
            if not isinstance(steps, Sequence) or not steps:
                raise ValueError(f"recipes[{key!r}].request() must return the steps' seconds; got {steps!r}")
            step_medians[key].append(statistics.median(steps))

        return run

    ring = RingReads(max(n_bytes for n_bytes, _ in reads), name)

    def read(n_bytes: int, threads: int | None) -> Callable[[], None]:
        def run() -> None:
            with thread_count(threads):
                ring.read(n_bytes)

        return run

    names = {key: f"request {index}" for index, key in enumerate(recipes)}
    candidates = {names[key]: request(key) for key in recipes}
    candidates |= {f"read {n} {t}": read(n, t) for n, t in sorted(reads, key=str)}
    timings = bench.compare(candidates, device=name, warmup=0, rounds=rounds)
    results = {}
    for key, recipe in recipes.items():
        read_gb_s = [
            recipe.n_bytes / s / 1e9 for s in timings[f"read {recipe.n_bytes} {recipe.threads}"].times_s
        ]
        gb_s = [recipe.n_bytes / s / 1e9 for s in step_medians[key]]
        shares = [g / r for g, r in zip(gb_s, read_gb_s, strict=True)]
        results[key] = ShareOfBound(
            tokens_s=1 / statistics.median(step_medians[key]),
            spread=_relative_range(step_medians[key]),
            gb_s=statistics.median(gb_s),
            bound_gb_s=statistics.median(read_gb_s),
            bound_spread=_relative_range(read_gb_s),
            share=statistics.median(shares),
            share_range=(min(shares), max(shares)),
        )
    memory = {}
    if past_cache_bytes is not None:
        for threads in sorted(thread_counts, key=str):
            memory[threads] = past_cache_bytes / timings[f"read {past_cache_bytes} {threads}"].median / 1e9
    return results, memory


def bound_table(
    results: Mapping[tuple[str, str], ShareOfBound], eager_tokens_s: Mapping[str, float] | None = None
) -> Markdown:
    """:func:`timed_against_reads`' results keyed ``(variant, recipe)`` as a table to ``display()``.

    With ``eager_tokens_s`` (by variant), an eager column comes before the compiled tokens/s.

    Example:
        >>> r = ShareOfBound(500.0, 0.02, 10.0, 20.0, 0.05, 0.5, (0.45, 0.55))
        >>> print(bound_table({("int8", "default"): r}).data.splitlines()[-1])
        | int8 | default | 500.0 | 2% | 10.0 | 20.0 (5%) | 50% (45%-55%) |
    """
    if not isinstance(results, Mapping) or not all(
        isinstance(key, tuple) and len(key) == 2 and isinstance(r, ShareOfBound) for key, r in results.items()
    ):
        raise TypeError(
            "results must map (variant, recipe) keys to ShareOfBound, as timed_against_reads returns"
        )
    if eager_tokens_s is not None and (
        not isinstance(eager_tokens_s, Mapping)
        or any(variant not in eager_tokens_s for variant, _ in results)
    ):
        raise ValueError("eager_tokens_s must map every variant of results to its eager tokens/s")
    eager = [] if eager_tokens_s is None else ["eager tokens/s (one request)"]
    header = ["variant", "recipe", *eager, "tokens/s", "rounds' spread", "GB/s", "read bound GB/s (spread)"]
    rows = [
        [
            variant,
            recipe,
            *([] if eager_tokens_s is None else [f"{eager_tokens_s[variant]:.1f}"]),
            f"{r.tokens_s:.1f}",
            f"{r.spread:.0%}",
            f"{r.gb_s:.1f}",
            f"{r.bound_gb_s:.1f} ({r.bound_spread:.0%})",
            f"{r.share:.0%} ({r.share_range[0]:.0%}-{r.share_range[1]:.0%})",
        ]
        for (variant, recipe), r in results.items()
    ]
    return markdown_table([*header, "of bound (range)"], rows)


def _state_bytes(module: torch.nn.Module) -> int:
    # Parameters and persistent buffers (an int8 weight stored as a buffer counts; a
    # non-persistent mask cache such as transformers 4.x's GPT-2 `attn.bias` does not: the
    # SDPA path never reads it). Each tensor once, even if registered under two names.
    seen: set[int] = set()
    total = 0
    for tensor in module.state_dict(keep_vars=True).values():
        if id(tensor) not in seen:
            seen.add(id(tensor))
            total += tensor.numel() * tensor.element_size()
    return total


def _gpt2_parts(model: Any) -> tuple[Any, torch.nn.Module]:
    body = getattr(model, "transformer", None)
    head = getattr(model, "lm_head", None)
    if (
        not isinstance(head, torch.nn.Module)
        or not isinstance(body, torch.nn.Module)
        or not all(hasattr(body, part) for part in ("h", "ln_f", "wte", "wpe"))
    ):
        raise TypeError(
            "model must be a transformers GPT-2 language model (a GPT2LMHeadModel: .transformer with "
            f".h, .ln_f, .wte, .wpe, and .lm_head); got {type(model).__name__}"
        )
    return body, head


def decode_step_bytes(
    model: Any, position: int, *, batch: int = 1, kv_dtype: torch.dtype | None = None
) -> dict[str, int]:
    """The bytes one single-token decoding step of a GPT-2 reads, by component.

    Counted as a step reads them, not as the model stores them: every weight of the blocks,
    the final norm and the LM head once; **one row** of the token and position embeddings
    per sequence (a lookup, not the tables); keys and values of every layer at ``position``
    positions. Tied weights (GPT-2 ties ``lm_head`` to ``wte``) count as read: the whole
    matrix for the head, one row for the lookup, although stored once. Weights are the
    modules' parameters and persistent buffers at their own dtype (an int8 weight counts one
    byte per element). Activations are not counted (a few KB at batch 1).

    Args:
        model: a ``GPT2LMHeadModel`` (or one with the same parts).
        position: how many cache positions the step's attention reads. A ``StaticCache``
            step reads its whole buffer (masked): pass ``max_cache_len``. A growing cache
            reads the tokens so far plus the new one.
        batch: sequences decoded together (weights are read once for the whole batch).
        kv_dtype: the cache's dtype; by default the token embedding's (the activations').

    Example:
        >>> from helpers.models import build_gpt2, gpt2_size
        >>> size = gpt2_size("cpu", n_layer=1, n_embd=64, n_head=2, vocab_size=128, n_positions=32, seq_len=8)
        >>> parts = decode_step_bytes(build_gpt2(size, via_pretrained=False), position=32)
        >>> parts["lm_head"], parts["wte_row"], parts["kv_cache"]  # 128 x 64, 64, 2 x 32 x 64 floats
        (32768, 256, 16384)
    """
    body, head = _gpt2_parts(model)
    for label, value in (("position", position), ("batch", batch)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{label} must be a positive int; got {value!r}")
    if kv_dtype is not None and not isinstance(kv_dtype, torch.dtype):
        raise TypeError(f"kv_dtype must be a torch.dtype or None; got {type(kv_dtype).__name__}")
    config = model.config
    wte, wpe = body.wte.weight, body.wpe.weight
    kv_size = torch.empty((), dtype=kv_dtype or wte.dtype).element_size()
    head_dim = config.n_embd // config.n_head
    return {
        "blocks": sum(_state_bytes(block) for block in body.h),
        "final_norm": _state_bytes(body.ln_f),
        "lm_head": _state_bytes(head),
        "wte_row": batch * wte.shape[1] * wte.element_size(),
        "wpe_row": batch * wpe.shape[1] * wpe.element_size(),
        "kv_cache": 2 * config.n_layer * batch * config.n_head * position * head_dim * kv_size,
    }


def describe_step_bytes(parts: Mapping[str, int]) -> str:
    """A printable table of :func:`decode_step_bytes`: each component, its MB, how it is counted.

    Example:
        >>> print(describe_step_bytes({"blocks": 2_000_000, "kv_cache": 500_000}))
        blocks          2.00 MB  every weight of the transformer blocks, read once
        kv_cache        0.50 MB  keys and values of every layer at the positions attention reads
        total           2.50 MB  read by one decoding step
    """
    if not isinstance(parts, Mapping) or not parts:
        raise ValueError("parts must be a non-empty mapping of component -> bytes (from decode_step_bytes)")
    rows = [
        f"{name:<12}{size / 1e6:>8.2f} MB  {STEP_BYTES_RULES.get(name, '')}".rstrip()
        for name, size in parts.items()
    ]
    rows.append(f"{'total':<12}{sum(parts.values()) / 1e6:>8.2f} MB  read by one decoding step")
    return "\n".join(rows)


def takes_cache_position(model: Any) -> bool:
    """Whether ``model.forward`` takes ``cache_position`` (transformers 4.x does; 5.x GPT-2 does not).

    transformers 4.x's ``StaticCache`` writes the new keys and values at ``cache_position``
    and, without it, computes the position from the cache's contents (a data-dependent
    ``.sum()`` that breaks a ``fullgraph=True`` graph). In 5.x the cache counts positions
    itself, in a tensor. transformers 5.x checks the same signature for remote-code models.

    Example:
        >>> takes_cache_position(torch.nn.Linear(2, 2))
        False
    """
    forward = getattr(model, "forward", None)
    if not callable(forward):
        raise TypeError(f"model must be a module with a forward method; got {type(model).__name__}")
    return "cache_position" in inspect.signature(forward).parameters


def position_inputs(model: Any, position: torch.Tensor) -> dict[str, torch.Tensor]:
    """The keyword arguments that place tokens at ``position`` (a 1-D tensor of positions).

    ``position_ids`` always (shape ``(1, n)``), plus ``cache_position`` where ``model``
    takes it (see :func:`takes_cache_position`). Pass them to the model's forward.

    Example:
        >>> from helpers.models import build_gpt2, gpt2_size
        >>> model = build_gpt2(gpt2_size("cpu", n_layer=1, n_embd=32, n_head=2), via_pretrained=False)
        >>> position_inputs(model, torch.arange(3))["position_ids"].tolist()
        [[0, 1, 2]]
    """
    return _positions(position, takes_cache_position(model))


def _positions(position: torch.Tensor, with_cache_position: bool) -> dict[str, torch.Tensor]:
    if not isinstance(position, torch.Tensor) or position.dim() != 1:
        raise ValueError(f"position must be a 1-D tensor of positions; got {position!r}")
    inputs = {"position_ids": position.unsqueeze(0)}
    if with_cache_position:
        inputs["cache_position"] = position
    return inputs


def new_static_cache(model: Any, max_len: int) -> Any:
    """A transformers ``StaticCache`` for ``model`` with room for ``max_len`` positions.

    Its tensors are allocated at the first use (the prefill), on the model's device and
    dtype. Reuse it across requests (:func:`generate_static` resets it): same addresses,
    so CUDA graphs replay instead of re-recording, and no recompilation on releases where
    Dynamo guards a static address.

    Example:
        >>> from helpers.models import build_gpt2, gpt2_size
        >>> model = build_gpt2(gpt2_size("cpu", n_layer=1, n_embd=32, n_head=2), via_pretrained=False)
        >>> new_static_cache(model, 16).layers[0].max_cache_len
        16
    """
    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 2:
        raise ValueError(f"max_len must be an int >= 2 (positions in the cache); got {max_len!r}")
    if getattr(model, "config", None) is None:
        raise TypeError(f"model must be a transformers model (with a .config); got {type(model).__name__}")
    from transformers import StaticCache

    return StaticCache(config=model.config, max_cache_len=max_len)


@dataclass(frozen=True)
class Generation:
    """What :func:`generate_static` returns.

    ``tokens``: prompt and new tokens, ``(batch, prompt_len + n_new)``. ``prefill_s``: the
    eager prefill's seconds. ``step_s``: the seconds of each decoding step (``n_new - 1``
    of them: the prefill produces the first new token). ``graphs_per_step``: the graphs
    Dynamo compiled during each step (0 once warm).

    Example:
        >>> g = Generation(torch.zeros(1, 5, dtype=torch.long), 0.01, (0.002, 0.001), (1, 0))
        >>> g.n_new, g.graphs_per_step
        (3, (1, 0))
    """

    tokens: torch.Tensor
    prefill_s: float
    step_s: tuple[float, ...]
    graphs_per_step: tuple[int, ...]

    @property
    def n_new(self) -> int:
        return len(self.step_s) + 1


def generate_static(
    model: Any,
    step: Step,
    prompt: torch.Tensor,
    n_new: int,
    *,
    cache: Any = None,
    max_len: int | None = None,
) -> Generation:
    """Greedy decoding with a static KV cache: eager prefill, then ``step`` once per new token.

    The prefill (the prompt, any length) runs eagerly and gives the first new token; then
    ``step(model, token, cache, positions)`` runs ``n_new - 1`` times, each timed (device
    synchronized) and its compiled graphs counted. Positions are passed explicitly (see
    :func:`position_inputs`), so the loop works with transformers 4.x and 5.x alike.
    Runs under ``torch.inference_mode()``.

    Args:
        model: a transformers causal LM (the course's GPT-2).
        step: the decoding step, eager or compiled (signature in the module docstring).
        prompt: token ids, ``(batch, prompt_len)``, on the model's device.
        n_new: tokens to generate (>= 1).
        cache: a ``StaticCache`` to reuse (it is ``reset()`` first); by default a new one.
        max_len: room of a new cache (default ``prompt_len + n_new``); ignored with ``cache``.

    Example:
        >>> from helpers.models import build_gpt2, gpt2_size, random_tokens
        >>> size = gpt2_size("cpu", n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=32, seq_len=8)
        >>> model = build_gpt2(size, via_pretrained=False)
        >>> def step(model, token, cache, positions):
        ...     logits = model(input_ids=token, past_key_values=cache, use_cache=True, **positions).logits
        ...     return logits[:, -1].argmax(dim=-1, keepdim=True)
        >>> out = generate_static(model, step, random_tokens(size, batch=1, seq_len=5), 4)
        >>> tuple(out.tokens.shape), len(out.step_s), out.graphs_per_step
        ((1, 9), 3, (0, 0, 0))
    """
    if not callable(step):
        raise TypeError(
            f"step must be callable as step(model, token, cache, positions); got {type(step).__name__}"
        )
    if not isinstance(prompt, torch.Tensor) or prompt.dim() != 2 or prompt.dtype != torch.long:
        got = (
            f"{tuple(prompt.shape)} {prompt.dtype}"
            if isinstance(prompt, torch.Tensor)
            else type(prompt).__name__
        )
        raise ValueError(f"prompt must be a (batch, prompt_len) tensor of token ids (torch.long); got {got}")
    if not isinstance(n_new, int) or isinstance(n_new, bool) or n_new < 1:
        raise ValueError(f"n_new must be a positive int; got {n_new!r}")
    prompt_len = prompt.shape[1]
    reuse = cache is not None
    if cache is None:
        cache = new_static_cache(model, prompt_len + n_new if max_len is None else max_len)
    room = cache.layers[0].max_cache_len
    if room < prompt_len + n_new:
        name = "max_len" if max_len is not None else "cache"
        raise ValueError(f"{name} holds {room} positions; prompt ({prompt_len}) + n_new ({n_new}) need more")
    with_cache_position = takes_cache_position(model)
    device = prompt.device
    with torch.inference_mode():
        if reuse:
            cache.reset()  # the same tensors, zeroed: nothing the compiled step guards on changes
        synchronize(device.type)
        start = time.perf_counter()
        positions = _positions(torch.arange(prompt_len, device=device), with_cache_position)
        logits = model(input_ids=prompt, past_key_values=cache, use_cache=True, **positions).logits
        token = logits[:, -1].argmax(dim=-1, keepdim=True)
        synchronize(device.type)
        prefill_s = time.perf_counter() - start
        tokens, seconds, graphs = [token], [], []
        position = torch.tensor([prompt_len], device=device)
        for _ in range(n_new - 1):
            positions = _positions(position, with_cache_position)
            with CompileCounts() as counts:
                synchronize(device.type)
                start = time.perf_counter()
                token = step(model, token, cache, positions).clone()  # clone: CUDA graphs reuse outputs
                synchronize(device.type)
                seconds.append(time.perf_counter() - start)
            graphs.append(counts.graphs)
            tokens.append(token)
            position = position + 1
    return Generation(torch.cat([prompt, *tokens], dim=1), prefill_s, tuple(seconds), tuple(graphs))


#: How :func:`split_step_time` files a profiler event by its name (the first rule that matches wins).
#: ATen matrix products (and the C++ GEMM template, recorded as ``graph_<n>_kernel``),
#: Inductor's fused C++ kernels (``cpp_fused_...``; they appear only with
#: ``torch._inductor.config.cpp.enable_kernel_profile = True``), and ATen's attention kernels.
STEP_TIME_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "matmul",
        (
            "aten::mm",
            "aten::addmm",
            "aten::bmm",
            "aten::baddbmm",
            "aten::_weight_int8pack_mm",
            "mkldnn::_linear_pointwise",
            "mkl::_mkl_linear",
        ),
    ),
    ("attention", ("aten::_scaled_dot_product", "aten::_flash_attention", "aten::_efficient_attention")),
)


def step_time_category(name: str) -> str | None:
    """The part of a decoding step a profiler event belongs to, from its name; ``None``: overhead.

    ``"matmul"`` (ATen's matrix products, called through the dispatcher or, under ``cpp_wrapper``,
    a C shim ``aoti_torch_cpu_<op>``; and Inductor's C++ GEMM template, whose kernel is recorded as
    ``graph_<n>_kernel``), ``"attention"`` (ATen's scaled-dot-product kernels),
    ``"fused elementwise"`` (Inductor's generated ``cpp_fused_...`` kernels, whatever ATen
    ops their name lists), else ``None``: the Python wrapper, guards and small ATen calls.

    Example:
        >>> names = ("aten::mm", "graph_0_cpp_fused_add_1", "graph_2_kernel", "aten::argmax")
        >>> [step_time_category(n) for n in names]
        ['matmul', 'fused elementwise', 'matmul', None]
        >>> step_time_category("aoti_torch_cpu__weight_int8pack_mm")  # the call, under cpp_wrapper
        'matmul'
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a profiler event's name (str); got {type(name).__name__}")
    if "cpp_fused" in name:
        return "fused elementwise"
    if name == "kernel" or (name.startswith("graph_") and name.endswith("_kernel")):
        return "matmul"
    # cpp_wrapper calls ATen through AOTInductor's C shims, which enable_kernel_profile records as
    # aoti_torch_cpu_<op> (RECORD_FUNCTION in torch/_inductor/codegen/cpp_wrapper_cpu.py)
    if name.startswith("aoti_torch_cpu_"):
        name = "aten::" + name.removeprefix("aoti_torch_cpu_")
    for category, prefixes in STEP_TIME_RULES:
        if any(name == p or name.startswith(p + ".") or name.startswith(p + "_") for p in prefixes):
            return category
    return None


def split_step_time(event_seconds: Mapping[str, float], step_s: float, n_steps: int) -> dict[str, float]:
    """Seconds per decoding step by part: matmul, fused elementwise, attention, and overhead.

    ``event_seconds`` maps each profiler event name to its total time, in seconds, over
    ``n_steps`` profiled steps (inclusive time: from ``torch.profiler``'s ``key_averages()``,
    ``{e.key: e.cpu_time_total / 1e6 for e in ...}``); ``step_s`` is the mean measured time of
    those same steps (the events are sums, so a median would not match them). Overhead is
    what the three kernel parts leave of ``step_s`` (never below 0): the Python wrapper,
    Dynamo's guards, small ATen calls, the profiler's own cost.

    Example:
        >>> events = {"aten::mm": 0.08, "graph_0_cpp_fused_add_0": 0.01}  # seconds over 10 steps
        >>> split = split_step_time(events, step_s=0.01, n_steps=10)
        >>> {k: round(v * 1e3, 1) for k, v in split.items()}
        {'matmul': 8.0, 'fused elementwise': 1.0, 'attention': 0.0, 'overhead': 1.0}
    """
    if not isinstance(event_seconds, Mapping):
        raise TypeError(
            f"event_seconds must be a mapping of event name -> seconds; got {type(event_seconds).__name__}"
        )
    if not isinstance(n_steps, int) or isinstance(n_steps, bool) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive int (the profiled steps); got {n_steps!r}")
    if not isinstance(step_s, int | float) or isinstance(step_s, bool) or not step_s > 0:
        raise ValueError(f"step_s must be a positive number of seconds; got {step_s!r}")
    split = {"matmul": 0.0, "fused elementwise": 0.0, "attention": 0.0}
    for name, seconds in event_seconds.items():
        category = step_time_category(name)
        if category is not None:
            split[category] += seconds / n_steps
    split["overhead"] = max(0.0, step_s - sum(split.values()))
    return split


def profiled_split(decode: Callable[[Step], Generation], step: Step) -> dict[str, float]:
    """One request's seconds per decoding step by part (:func:`split_step_time`), from ``torch.profiler``.

    ``decode(step)`` runs one request with the decoding step it is given (a call of
    :func:`generate_static`). The profiler starts as the first step returns, so the prefill and
    the first step (a compile, if it is one) stay out and every later step is profiled whole;
    their mean measured time is split, since the profiler's events are sums. Kineto's start and
    stop lines on stderr are discarded. The request needs ``n_new >= 3`` (two profiled steps).

    Example:
        >>> from helpers.models import build_gpt2, gpt2_size, random_tokens
        >>> size = gpt2_size("cpu", n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=32, seq_len=8)
        >>> model, prompt = build_gpt2(size, via_pretrained=False), random_tokens(size, batch=1, seq_len=4)
        >>> def step(model, token, cache, positions):
        ...     logits = model(input_ids=token, past_key_values=cache, use_cache=True, **positions).logits
        ...     return logits[:, -1].argmax(dim=-1, keepdim=True)
        >>> split = profiled_split(lambda s: generate_static(model, s, prompt, 4), step)
        >>> list(split), split["matmul"] > 0
        (['matmul', 'fused elementwise', 'attention', 'overhead'], True)
    """
    if not callable(decode) or not callable(step):
        bad = "decode" if not callable(decode) else "step"
        raise TypeError(f"{bad} must be callable: decode(step) -> Generation; step(model, token, cache, pos)")
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    calls = 0

    def profiled_step(model: Any, token: torch.Tensor, cache: Any, positions: Mapping[str, torch.Tensor]):
        nonlocal calls
        token = step(model, token, cache, positions)
        calls += 1
        if calls == 1:
            profiler.start()
        return token

    with native_stderr_discarded():
        try:
            run = decode(profiled_step)
        finally:
            if calls:
                profiler.stop()
    if not isinstance(run, Generation):
        raise TypeError(f"decode must return generate_static's Generation; got {type(run).__name__}")
    if len(run.step_s) < 2:
        made = len(run.step_s)
        raise ValueError(f"decode's request must make at least 2 decoding steps (n_new >= 3); it made {made}")
    events = {e.key: e.cpu_time_total / 1e6 for e in profiler.key_averages()}
    return split_step_time(events, statistics.fmean(run.step_s[1:]), len(run.step_s) - 1)


#: A step at this share of its read bound or more is "near the bound" (the course's line).
NEAR_THE_BOUND = 0.7


def what_holds_it_back(n_bytes: int, split: Mapping[str, float], timing: ShareOfBound) -> str:
    """One line on a decoding step against its read bound: its products, the rest, and a verdict.

    ``split`` is one profiled request's :func:`profiled_split` and ``timing`` the same recipe's
    :class:`ShareOfBound`. The profiler slows the request it records, so the split gives only
    shares, applied to the timed (median) step: the products' time, their rate (the step's
    ``n_bytes`` over their time) against the bound, and what the products and the rest (norms,
    attention, overhead) each take beyond a read of the bytes. The verdict: ``near the bound`` at
    :data:`NEAR_THE_BOUND` of it or more (the timed share, rounded as printed); else whichever part
    takes more time beyond the read holds the step back most, unless the two differ by no more
    than the read's own spread (``timing.bound_spread`` of the read's time): then both, about equally.

    Example:
        >>> timing = ShareOfBound(50.0, 0.1, 8.0, 16.0, 0.05, 0.5, (0.45, 0.55))  # a 20 ms step
        >>> split = {"matmul": 0.018, "fused elementwise": 0.0, "attention": 0.001, "overhead": 0.001}
        >>> print(*what_holds_it_back(160_000_000, split, timing).split("; "), sep="\\n")
        products 90% of the step, reading at 56% of the bound
        beyond the read: products 8.0 ms, the rest 2.0 ms: the kernels hold it back most
    """
    if not isinstance(n_bytes, int) or isinstance(n_bytes, bool) or n_bytes < 1:
        raise ValueError(f"n_bytes must be a positive int (the step's bytes); got {n_bytes!r}")
    if not isinstance(split, Mapping) or not {"matmul", "overhead"} <= set(split):
        raise TypeError(f"split must be profiled_split's dict of seconds by part; got {split!r}")
    if not isinstance(timing, ShareOfBound):
        raise TypeError(f"timing must be timed_against_reads' ShareOfBound; got {type(timing).__name__}")
    if split["matmul"] <= 0:
        return "the profile names no matrix product: not split"
    step_s, products_share = 1 / timing.tokens_s, split["matmul"] / sum(split.values())
    products_s, read_s = products_share * step_s, n_bytes / (timing.bound_gb_s * 1e9)
    rate = read_s / products_s
    # above 1: the products outran the read timed in other rounds (the read's spread), not the bound
    above = f" (the read's spread: {timing.bound_spread:.0%})" if rate > 1 else ""
    over_products, rest = max(0.0, products_s - read_s), step_s - products_s
    if round(timing.share, 2) >= NEAR_THE_BOUND:
        verdict = "near the bound"
    elif abs(over_products - rest) <= read_s * timing.bound_spread:  # closer than the read's own spread
        verdict = "the kernels and the rest about equally (within the read's spread)"
    else:
        verdict = "the kernels hold it back most" if over_products > rest else "the rest holds it back most"
    return (
        f"products {products_share:.0%} of the step, reading at {rate:.0%} of the bound{above}; "
        f"beyond the read: products {over_products * 1e3:.1f} ms, the rest {rest * 1e3:.1f} ms: {verdict}"
    )
