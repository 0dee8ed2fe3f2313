"""Honest timing: warm-up, device synchronization, repeats, medians with spread.

Variants are timed interleaved (A B A B ...), so a noisy shared machine slows them
alike, and the first call (which compiles) is measured apart from the steady state.
Built on the standard library's ``timeit.Timer`` with a clock that synchronizes the
device: ``torch.utils.benchmark.Timer.timeit`` adds two warm-up calls to every
measurement, which would break the interleaving and triple the cost of slow models.
"""

from __future__ import annotations

import math
import statistics
import time
import timeit
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from helpers.device import normalize_device, synchronize


@dataclass(frozen=True)
class Timing:
    """Seconds per call of one variant, over repeats.

    Example:
        >>> t = Timing("eager", (0.010, 0.012, 0.011))
        >>> round(t.median * 1e3, 1), t.n
        (11.0, 3)
    """

    name: str
    times_s: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.times_s:
            raise ValueError("times_s must hold at least one measurement")

    @property
    def n(self) -> int:
        return len(self.times_s)

    @property
    def median(self) -> float:
        return statistics.median(self.times_s)

    @property
    def q1(self) -> float:
        return _quantile(self.times_s, 0.25)

    @property
    def q3(self) -> float:
        return _quantile(self.times_s, 0.75)

    @property
    def iqr(self) -> float:
        """Interquartile range: the spread of the middle half of the repeats."""
        return self.q3 - self.q1

    def __str__(self) -> str:
        return (
            f"{self.name}: median {self.median * 1e3:.3f} ms "
            f"(IQR {self.q1 * 1e3:.3f}-{self.q3 * 1e3:.3f} ms, n={self.n})"
        )


def _quantile(values: tuple[float, ...], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=4, method="inclusive")[round(q * 4) - 1]


def _synchronized_clock(device: str) -> Callable[[], float]:
    def clock() -> float:
        synchronize(device)
        return time.perf_counter()

    return clock


def _check_positive(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; got {value!r}")


def compare(
    variants: Mapping[str, Callable[[], Any]],
    *,
    device: str | torch.device | None = "cpu",
    warmup: int = 3,
    rounds: int = 15,
    number: int = 1,
) -> dict[str, Timing]:
    """Time several zero-argument callables interleaved and return a :class:`Timing` each.

    Each variant is first called ``warmup`` times (compiled ones should already have paid
    their compile time: see :func:`first_call`). Then, ``rounds`` times over, each variant
    runs ``number`` calls in turn, with the device synchronized around each batch. Each round
    starts with the next variant in turn, so that over a number of rounds that is a multiple of the
    number of variants, every variant runs first equally often: in a fixed
    order the first variant of a round measured slower (two identical eager training steps
    1.09-1.13x apart, notebook 07).

    Example:
        >>> x = torch.randn(64, 64)
        >>> timings = compare({"mm": lambda: x @ x, "add": lambda: x + x}, rounds=3)
        >>> sorted(timings), timings["mm"].n
        (['add', 'mm'], 3)
    """
    if not isinstance(variants, Mapping) or not variants:
        raise ValueError("variants must be a non-empty mapping of name -> zero-argument callable")
    for name, fn in variants.items():
        if not callable(fn):
            raise TypeError(f"variants[{name!r}] must be callable; got {type(fn).__name__}")
    _check_positive("warmup", warmup, minimum=0)
    _check_positive("rounds", rounds)
    _check_positive("number", number)
    device_name = normalize_device(device)
    clock = _synchronized_clock(device_name)
    timers = {name: timeit.Timer(fn, timer=clock) for name, fn in variants.items()}
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    synchronize(device_name)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    names = list(timers)
    for round_index in range(rounds):
        start = round_index % len(names)
        for name in names[start:] + names[:start]:
            samples[name].append(timers[name].timeit(number) / number)
    return {name: Timing(name, tuple(times)) for name, times in samples.items()}


def time_call(
    fn: Callable[[], Any],
    *,
    name: str = "fn",
    device: str | torch.device | None = "cpu",
    warmup: int = 3,
    rounds: int = 15,
    number: int = 1,
) -> Timing:
    """Time one zero-argument callable (see :func:`compare` for the procedure).

    Example:
        >>> print(time_call(lambda: torch.ones(8).sum(), rounds=3).n)
        3
    """
    return compare({name: fn}, device=device, warmup=warmup, rounds=rounds, number=number)[name]


def first_call(fn: Callable[[], Any], *, device: str | torch.device | None = "cpu") -> tuple[float, Any]:
    """Seconds taken by the first call of ``fn`` (where ``torch.compile`` compiles), and its result.

    Example:
        >>> seconds, result = first_call(lambda: torch.ones(2) * 2)
        >>> seconds > 0, result.tolist()
        (True, [2.0, 2.0])
    """
    if not callable(fn):
        raise TypeError(f"fn must be a zero-argument callable; got {type(fn).__name__}")
    device_name = normalize_device(device)
    synchronize(device_name)
    start = time.perf_counter()
    result = fn()
    synchronize(device_name)
    return time.perf_counter() - start, result


def break_even_calls(first_call_s: float, eager_s: float, compiled_s: float) -> int | None:
    """After how many calls compiling has paid for itself, or ``None`` if it never does.

    The first compiled call costs ``first_call_s`` (compile included), later ones
    ``compiled_s``; every eager call costs ``eager_s``.

    Example:
        >>> break_even_calls(first_call_s=2.0, eager_s=0.010, compiled_s=0.006)
        499
        >>> break_even_calls(first_call_s=2.0, eager_s=0.010, compiled_s=0.012) is None
        True
    """
    for label, value in (("first_call_s", first_call_s), ("eager_s", eager_s), ("compiled_s", compiled_s)):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{label} must be a positive number of seconds; got {value!r}")
    saving = eager_s - compiled_s
    if saving <= 0:
        return None
    # n calls: first_call_s + (n - 1) * compiled_s <= n * eager_s
    return max(1, math.ceil((first_call_s - compiled_s) / saving - 1e-9))
