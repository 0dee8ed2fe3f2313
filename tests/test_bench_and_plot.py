"""Timing and plotting helpers: what they compute, and their errors for bad input."""

from __future__ import annotations

import pytest
import torch
from matplotlib.figure import Figure

from helpers import bench, plot
from helpers.bench import Timing


def test_timing_statistics():
    timing = Timing("t", (0.004, 0.001, 0.003, 0.002, 0.005))
    assert timing.median == 0.003
    assert timing.q1 == pytest.approx(0.002) and timing.q3 == pytest.approx(0.004)
    assert timing.iqr == pytest.approx(0.002)
    assert "median 3.000 ms" in str(timing)


def test_timing_needs_measurements():
    with pytest.raises(ValueError, match="times_s"):
        Timing("empty", ())


def test_compare_interleaves_variants():
    order = []
    timings = bench.compare(
        {"a": lambda: order.append("a"), "b": lambda: order.append("b")}, warmup=1, rounds=3
    )
    assert {name: t.n for name, t in timings.items()} == {"a": 3, "b": 3}
    # warm-up a, warm-up b, then rounds that start with each variant in turn: a b, b a, a b
    assert order[2:] == ["a", "b", "b", "a", "a", "b"]


def test_compare_measures_slower_work_as_slower():
    big, small = torch.randn(256, 256), torch.randn(8, 8)
    timings = bench.compare({"big": lambda: big @ big @ big, "small": lambda: small + 1}, rounds=5)
    assert timings["big"].median > timings["small"].median


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"variants": {}}, "variants"),
        ({"variants": {"x": 3}}, "callable"),
        ({"variants": {"x": lambda: 0}, "rounds": 0}, "rounds"),
        ({"variants": {"x": lambda: 0}, "warmup": -1}, "warmup"),
        ({"variants": {"x": lambda: 0}, "number": 1.5}, "number"),
        ({"variants": {"x": lambda: 0}, "device": "tpu"}, "device"),
    ],
)
def test_compare_rejects_bad_input(kwargs, message):
    variants = kwargs.pop("variants")
    with pytest.raises((ValueError, TypeError), match=message):
        bench.compare(variants, **kwargs)


def test_first_call_returns_time_and_result():
    seconds, result = bench.first_call(lambda: 41 + 1)
    assert seconds >= 0 and result == 42
    with pytest.raises(TypeError, match="fn"):
        bench.first_call("not callable")


def test_break_even():
    assert bench.break_even_calls(1.0, 0.010, 0.005) == 199
    assert bench.break_even_calls(0.004, 0.010, 0.005) == 1
    assert bench.break_even_calls(1.0, 0.005, 0.005) is None
    with pytest.raises(ValueError, match="eager_s"):
        bench.break_even_calls(1.0, 0.0, 0.005)
    with pytest.raises(ValueError, match="first_call_s"):
        bench.break_even_calls(float("nan"), 0.01, 0.005)


def test_latency_chart_names_hardware_and_speedups():
    timings = {"eager": Timing("eager", (0.02, 0.02)), "compiled": Timing("compiled", (0.01, 0.01))}
    fig = plot.latency_chart(timings, hardware="CPU: test", baseline="eager")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert "CPU: test" in ax.get_title()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["eager\n1.00x vs eager", "compiled\n2.00x vs eager"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timings": []}, "timings"),
        ({"timings": [1, 2]}, "timings"),
        ({"hardware": ""}, "hardware"),
        ({"unit": "hours"}, "unit"),
        ({"baseline": "missing"}, "baseline"),
    ],
)
def test_latency_chart_rejects_bad_input(kwargs, message):
    arguments = {"timings": [Timing("eager", (0.01,))], "hardware": "CPU"} | kwargs
    with pytest.raises(ValueError, match=message):
        plot.latency_chart(arguments.pop("timings"), **arguments)


def test_break_even_chart_marks_the_crossing():
    fig = plot.break_even_chart(first_call_s=1.0, eager_s=0.010, compiled_s=0.005, hardware="CPU")
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "break-even at call 199" in texts


def test_break_even_chart_names_its_unit():
    fig = plot.break_even_chart(
        first_call_s=1.0, eager_s=0.010, compiled_s=0.005, hardware="CPU", unit="step"
    )
    ax = fig.axes[0]
    assert ax.get_xlabel() == "steps" and "break-even at step 199" in " ".join(t.get_text() for t in ax.texts)
    assert all("/step" in text.get_text() for text in ax.get_legend().get_texts())


def test_break_even_chart_when_it_never_pays():
    fig = plot.break_even_chart(first_call_s=1.0, eager_s=0.005, compiled_s=0.006, hardware="CPU")
    assert "never pays off" in " ".join(t.get_text() for t in fig.axes[0].texts)


def test_break_even_chart_rejects_bad_input():
    with pytest.raises(ValueError, match="calls"):
        plot.break_even_chart(first_call_s=1, eager_s=0.01, compiled_s=0.005, hardware="CPU", calls=1)
    with pytest.raises(ValueError, match="hardware"):
        plot.break_even_chart(first_call_s=1, eager_s=0.01, compiled_s=0.005, hardware=" ")
    for bad in ("", " step", 3):
        with pytest.raises(ValueError, match="unit must be a word"):
            plot.break_even_chart(first_call_s=1, eager_s=0.01, compiled_s=0.005, hardware="CPU", unit=bad)


def test_break_even_chart_says_what_its_first_call_holds():
    def compiled_label(**kwargs):
        fig = plot.break_even_chart(
            first_call_s=3.0, eager_s=0.01, compiled_s=0.006, hardware="CPU", unit="step", **kwargs
        )
        return fig.axes[0].get_legend().get_texts()[1].get_text()

    assert compiled_label() == "compiled (6.00 ms/step after a 3.0 s first step)"
    two = compiled_label(first_call_label="two first steps (model, optimizer)")
    assert two == "compiled (6.00 ms/step after two first steps (model, optimizer))"
    with pytest.raises(ValueError, match="first_call_label must be a non-empty str or None"):
        compiled_label(first_call_label=" ")
