"""Peak memory of a call: the CPU (RSS sampling) path and argument checks."""

from __future__ import annotations

import time

import pytest
import torch

from helpers.memory import MemoryPeak, peak_memory


def test_cpu_peak_sees_a_large_short_lived_tensor():
    def allocate_and_hold():
        block = torch.ones(64, 2**20)  # 256 MiB of float32, every page written
        time.sleep(0.05)  # long enough for the sampler to see it
        return float(block[0, 0])

    peak = peak_memory(allocate_and_hold, device="cpu")
    assert isinstance(peak, MemoryPeak)
    assert peak.peak_mib > 200, str(peak)
    assert "RSS" in peak.method


def test_cpu_peak_of_a_call_that_allocates_nothing_is_small():
    peak = peak_memory(lambda: time.sleep(0.01), device="cpu", calls=2)
    assert peak.peak_mib < 50, str(peak)


def test_str_names_the_method():
    text = str(MemoryPeak(peak_bytes=2**20, baseline_bytes=2**30, method="RSS"))
    assert text.startswith("1.0 MiB") and "RSS" in text


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"calls": 0}, "calls"),
        ({"calls": 1.5}, "calls"),
        ({"interval_s": 0}, "interval_s"),
        ({"device": "tpu"}, "device"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        peak_memory(lambda: None, **kwargs)


def test_fn_must_be_callable():
    with pytest.raises(TypeError, match="fn"):
        peak_memory(42)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_cuda_without_a_gpu_says_so():
    with pytest.raises(ValueError, match="cuda"):
        peak_memory(lambda: None, device="cuda")
