"""Charts of eager vs compiled latency. Each function returns a new ``Figure``
and touches no global plotting state (no ``pyplot``), so notebooks display it with
``display(fig)`` or by leaving it as a cell's last expression.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from helpers.bench import Timing, break_even_calls

_UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6}


def _scale(unit: str) -> float:
    if unit not in _UNITS:
        raise ValueError(f"unit must be one of {', '.join(map(repr, _UNITS))}; got {unit!r}")
    return _UNITS[unit]


def _check_hardware(hardware: str) -> None:
    if not isinstance(hardware, str) or not hardware.strip():
        raise ValueError("hardware must name the machine, e.g. 'CPU: 2 threads, Xeon'; got an empty value")


def latency_chart(
    timings: Mapping[str, Timing] | Sequence[Timing],
    *,
    hardware: str,
    title: str = "Steady-state latency per call",
    unit: str = "ms",
    baseline: str | None = None,
) -> Figure:
    """Bars of median latency with the interquartile range as error bars.

    Args:
        timings: one :class:`~helpers.bench.Timing` per variant (e.g. from ``bench.compare``).
        hardware: the machine, shown in the title (e.g. ``env.hardware_name("cpu")``).
        unit: ``"s"``, ``"ms"`` or ``"us"``.
        baseline: a variant's name; each bar is labelled with its speedup over it.

    Example:
        >>> fig = latency_chart([Timing("eager", (0.010, 0.011)), Timing("compiled", (0.007,))],
        ...                     hardware="CPU", baseline="eager")
        >>> fig.axes[0].get_ylabel()
        'median latency (ms)'
    """
    items = list(timings.values()) if isinstance(timings, Mapping) else list(timings)
    if not items or not all(isinstance(t, Timing) for t in items):
        raise ValueError("timings must be a non-empty mapping or sequence of helpers.bench.Timing")
    _check_hardware(hardware)
    scale = _scale(unit)
    names = [t.name for t in items]
    if baseline is not None and baseline not in names:
        raise ValueError(f"baseline must be one of {names}; got {baseline!r}")
    medians = np.array([t.median for t in items]) * scale
    lower = medians - np.array([t.q1 for t in items]) * scale
    upper = np.array([t.q3 for t in items]) * scale - medians

    fig = Figure(figsize=(1.6 + 1.4 * len(items), 3.6), layout="constrained")
    ax = fig.subplots()
    tick_labels = names
    if baseline is not None:
        # The speedup goes under each name: labels on the bars collide with short error bars.
        base = medians[names.index(baseline)]
        tick_labels = [
            f"{name}\n{base / m:.2f}x vs {baseline}" for name, m in zip(names, medians, strict=True)
        ]
    ax.bar(range(len(items)), medians, yerr=[lower, upper], capsize=6, color="C0")
    ax.set_xticks(range(len(items)), tick_labels)
    ax.set_ylabel(f"median latency ({unit})")
    ax.set_title(f"{title}\n{hardware}", fontsize=10)
    ax.margins(y=0.15)
    n_repeats = ", ".join(sorted({str(t.n) for t in items}))
    ax.set_xlabel(f"error bars: interquartile range over n={n_repeats} repeats", fontsize=8, color="grey")
    return fig


def break_even_chart(
    *,
    first_call_s: float,
    eager_s: float,
    compiled_s: float,
    hardware: str,
    calls: int | None = None,
    title: str = "Cumulative time: when does compiling pay off?",
    unit: str = "call",
    first_call_label: str | None = None,
) -> Figure:
    """Cumulative seconds over calls for eager and compiled, with the break-even call marked.

    ``first_call_s`` is the compiled variant's first call (compile time included); the
    others are steady-state seconds per call, e.g. the medians from ``bench.compare``. ``unit``
    names what one call is where "call" would mislead, e.g. ``"step"`` for a training step.
    ``first_call_label`` says what ``first_call_s`` is in the legend where it is more than one
    first call (default: ``"a 2.0 s first call"``).

    Example:
        >>> fig = break_even_chart(first_call_s=2.0, eager_s=0.010, compiled_s=0.006, hardware="CPU")
        >>> fig.axes[0].get_xlabel()
        'calls'
        >>> break_even_chart(first_call_s=2.0, eager_s=0.01, compiled_s=0.006, hardware="CPU",
        ...                  unit="step").axes[0].get_xlabel()
        'steps'
    """
    _check_hardware(hardware)
    if not isinstance(unit, str) or not unit.strip() or unit != unit.strip():
        raise ValueError(f"unit must be a word such as 'call' or 'step'; got {unit!r}")
    if first_call_label is not None and (
        not isinstance(first_call_label, str) or not first_call_label.strip()
    ):
        raise ValueError(f"first_call_label must be a non-empty str or None; got {first_call_label!r}")
    first = first_call_label or f"a {first_call_s:.1f} s first {unit}"
    crossing = break_even_calls(first_call_s, eager_s, compiled_s)
    if calls is None:
        calls = 2 * crossing if crossing else 1000
    if not isinstance(calls, int) or calls < 2:
        raise ValueError(f"calls must be an int >= 2; got {calls!r}")
    n = np.arange(1, calls + 1)
    eager_total = n * eager_s
    compiled_total = first_call_s + (n - 1) * compiled_s

    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    ax.plot(n, eager_total, label=f"eager ({eager_s * 1e3:.2f} ms/{unit})")
    ax.plot(
        n,
        compiled_total,
        label=f"compiled ({compiled_s * 1e3:.2f} ms/{unit} after {first})",
    )
    if crossing and crossing <= calls:
        ax.axvline(crossing, color="grey", linestyle="--")
        ax.annotate(
            f"break-even at {unit} {crossing:,}",
            (crossing, crossing * eager_s),
            xytext=(8, -14),
            textcoords="offset points",
            fontsize=9,
        )
    elif crossing is None:
        ax.annotate(
            f"compiled is not faster per {unit} here: it never pays off",
            (0.02, 0.92),
            xycoords="axes fraction",
            fontsize=9,
            color="C3",
        )
    ax.set_xlabel(f"{unit}s")
    ax.set_ylabel("cumulative time (s)")
    ax.set_title(f"{title}\n{hardware}", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return fig
