"""Notebook 09's exercise checks: right answers pass, realistic wrong answers are rejected."""

from __future__ import annotations

import re

import pytest
import torch

from helpers.exercises.nb09 import check_float32_activations, check_mlp_only, fused_int8_calls

FUSED = "buf{i} = extern_kernels._weight_int8pack_mm(reinterpret_tensor(buf{i}, (1, 64), (0, 1), 0), w, s)\n"
UNFUSED = "extern_kernels.mm(buf0, buf1, out=buf2)\ncpp_fused_0(const int8_t* in_ptr0, float* out_ptr0)\n"


def fused(n: int) -> str:
    return "".join(FUSED.format(i=i) for i in range(n))


def test_counting_fused_calls():
    assert fused_int8_calls(fused(3) + UNFUSED) == 3
    with pytest.raises(TypeError, match="generated_code"):
        fused_int8_calls(None)


def test_exercise_1():
    assert check_float32_activations(None, None, activation_dtype=torch.bfloat16, n_int8_layers=9).endswith(
        "not answered yet."
    )
    assert (
        check_float32_activations(0, UNFUSED, activation_dtype=torch.float32, n_int8_layers=9)
        == "Exercise 1: correct."
    )
    # "the pattern matches whatever the activations": one call per int8 layer of the tiny model (9)
    with pytest.raises(AssertionError, match="Exercise 1: 9 is too high"):
        check_float32_activations(9, UNFUSED, activation_dtype=torch.float32, n_int8_layers=9)
    # the model was not changed: its activations are still bfloat16
    with pytest.raises(AssertionError, match="not float32"):
        check_float32_activations(9, fused(9), activation_dtype=torch.bfloat16, n_int8_layers=9)
    with pytest.raises(ValueError, match="prediction"):
        check_float32_activations(-1, UNFUSED, activation_dtype=torch.float32, n_int8_layers=9)
    with pytest.raises(TypeError, match="activation_dtype"):
        check_float32_activations(0, UNFUSED, activation_dtype="float32", n_int8_layers=9)
    # quantize_int8 dropped along with .to(HALF): a float32 model, nothing fuses, 0 "predicted"
    with pytest.raises(AssertionError, match="no int8 layer"):
        check_float32_activations(0, UNFUSED, activation_dtype=torch.float32, n_int8_layers=0)
    # .half() instead of float32: float16 activations, nothing fuses either
    with pytest.raises(AssertionError, match="not float32"):
        check_float32_activations(0, UNFUSED, activation_dtype=torch.float16, n_int8_layers=9)
    with pytest.raises(ValueError, match="n_int8_layers"):
        check_float32_activations(0, UNFUSED, activation_dtype=torch.float32, n_int8_layers=None)


MLP = [f"transformer.h.{i}.mlp.{n}" for i in range(2) for n in ("c_fc", "c_proj")]
ATTN = [f"transformer.h.{i}.attn.{n}" for i in range(2) for n in ("c_attn", "c_proj")]
ALL = MLP + ATTN + ["lm_head"]


def test_exercise_2():
    assert check_mlp_only(None, None, int8_layers=ALL, n_layer=2).endswith("not answered yet.")
    assert check_mlp_only(4, fused(4), int8_layers=MLP, n_layer=2) == "Exercise 2: correct."
    for wrong in (2, 9, 5):  # one per block; every layer; 4 per block plus the head minus attention
        with pytest.raises(AssertionError, match=r"Exercise 2: [259] is too (high|low)"):
            check_mlp_only(wrong, fused(4), int8_layers=MLP, n_layer=2)
    # the whole model quantized (the placeholder)
    with pytest.raises(AssertionError, match="outside the MLPs") as error:
        check_mlp_only(9, fused(9), int8_layers=ALL, n_layer=2)
    assert not re.search(r"\b\d+\b", str(error.value).split("(e.g.")[0].removeprefix("Exercise 2"))
    # as many layers as the MLPs have, but the wrong ones: only=".attn." or only="c_proj"
    with pytest.raises(AssertionError, match="some int8 layers are outside the MLPs"):
        check_mlp_only(4, fused(4), int8_layers=ATTN, n_layer=2)
    c_proj = [n for n in MLP + ATTN if n.endswith("c_proj")]
    with pytest.raises(AssertionError, match="outside the MLPs"):
        check_mlp_only(4, fused(4), int8_layers=c_proj, n_layer=2)
    # only c_fc: half the MLP
    with pytest.raises(AssertionError, match="not every MLP layer of every block is int8") as error:
        check_mlp_only(2, fused(2), int8_layers=[n for n in MLP if n.endswith("c_fc")], n_layer=2)
    assert not re.search(r"\b\d+\b", str(error.value).removeprefix("Exercise 2"))
    # MLP-only, but float32 activations: nothing fused
    with pytest.raises(AssertionError, match="bfloat16") as error:
        check_mlp_only(4, UNFUSED, int8_layers=MLP, n_layer=2)
    assert "Exercise 2: the generated code does not call" in str(error.value)
    assert not re.search(r"\b\d+\b", str(error.value).removeprefix("Exercise 2"))
    with pytest.raises(ValueError, match="n_layer"):
        check_mlp_only(4, fused(4), int8_layers=MLP, n_layer=0)
    with pytest.raises(TypeError, match="int8_layers"):
        check_mlp_only(4, fused(4), int8_layers=4, n_layer=2)
