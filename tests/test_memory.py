"""Memory of a call (helpers.memory): the peak, one method per device, and saved activations."""

from __future__ import annotations

import pytest
import torch

from helpers.memory import METHODS, MemoryPeak, SavedTensors, peak_memory, saved_activations


def test_cpu_peak_sees_a_temporary_and_what_is_kept():
    kept = []

    def make_temporary_and_keep_one():
        torch.ones(2048, 1024).sum()  # an 8 MiB temporary, freed at once
        kept.append(torch.ones(256, 1024))  # 1 MiB that stays

    peak = peak_memory(make_temporary_and_keep_one, device="cpu")
    assert isinstance(peak, MemoryPeak) and peak.method == METHODS["cpu"]
    assert peak.peak_bytes >= 8 * 2**20, str(peak)
    assert peak.retained_bytes == 2**20, str(peak)


def test_cpu_peak_of_a_call_that_allocates_nothing_is_zero():
    assert peak_memory(lambda: None, device="cpu", calls=2).peak_bytes == 0


def test_str_says_mib():
    text = str(MemoryPeak(peak_bytes=2**20, retained_bytes=0, method="cpu"))
    assert text == "peak 1.0 MiB, 0.0 MiB kept after the call (cpu)"
    assert str(SavedTensors(count=2, nbytes=2**21)) == "2 tensors, 2.0 MiB"


@pytest.mark.parametrize(
    ("kwargs", "match"), [({"calls": 0}, "calls"), ({"calls": 1.5}, "calls"), ({"device": "tpu"}, "device")]
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        peak_memory(lambda: None, **kwargs)


@pytest.mark.parametrize("helper", [peak_memory, saved_activations])
def test_fn_must_be_callable(helper):
    with pytest.raises(TypeError, match="fn must be a zero-argument callable"):
        helper(42)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_cuda_without_a_gpu_says_so():
    with pytest.raises(ValueError, match="cuda"):
        peak_memory(lambda: None, device="cuda")


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="checks the no-MPS error")
def test_mps_without_an_apple_gpu_says_so():
    with pytest.raises(ValueError, match="mps"):
        peak_memory(lambda: None, device="mps")


def test_saved_activations_counts_storages_once_and_excludes():
    x = torch.randn(100, requires_grad=True)
    weight = torch.randn(100, requires_grad=True)
    everything = saved_activations(lambda: (torch.sin(x) * weight).sum())
    without_weight = saved_activations(lambda: (torch.sin(x) * weight).sum(), exclude=[weight])
    assert everything.count == without_weight.count + 1
    assert without_weight.nbytes == without_weight.count * 400
    with pytest.raises(ValueError, match="exclude"):
        saved_activations(lambda: None, exclude=[1, 2])
