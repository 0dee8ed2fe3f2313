"""Self-checks of notebook 09's exercises: the bytes a batched int8 step reads, and fused int8 calls.

Exercise 1's check counts bytes itself (``helpers.decoding.decode_step_bytes``); exercise 2's
reads the code Inductor generated for the learner's model (the notebook passes it in, from
``helpers.logs.generated_code``), so the checks are fast to test.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from helpers.decoding import decode_step_bytes
from helpers.exercises import check_answer, wrong_answer

#: How Inductor's generated code calls the fused weight-only int8 kernel.
FUSED_INT8_CALL = "_weight_int8pack_mm("


def fused_int8_calls(generated_code: str) -> int:
    """How many calls of the fused int8 kernel ``generated_code`` makes.

    Example:
        >>> fused_int8_calls("buf1 = extern_kernels._weight_int8pack_mm(buf0, arg1_1, arg2_1)")
        1
    """
    if not isinstance(generated_code, str):
        raise TypeError(
            f"generated_code must be the generated code (str); got {type(generated_code).__name__}"
        )
    return generated_code.count(FUSED_INT8_CALL)


def _prediction(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"prediction must be a count (an int >= 0); got {value!r}")
    return value


def check_batch_bytes(
    prediction: float | None,
    *,
    int8_model: torch.nn.Module,
    half_model: torch.nn.Module,
    positions: int,
    batch: int,
) -> str:
    """Exercise 1: the int8 step's bytes as a percentage of the 16-bit step's, within 2 points.

    The check counts both steps itself (``helpers.decoding.decode_step_bytes`` at ``batch``
    sequences, ``positions`` cached positions), so the cell that calls it does not show the
    answer; a percentage given as a fraction (0.5 for half) is rejected with a hint rather than
    called too low.

    Example:
        >>> from transformers import GPT2Config, GPT2LMHeadModel
        >>> from helpers.quantize import linearize, quantize_int8
        >>> config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=8)
        >>> tiny = linearize(GPT2LMHeadModel(config))
        >>> int8 = quantize_int8(tiny).to(torch.bfloat16)  # a quantized copy
        >>> half = tiny.to(torch.bfloat16)
        >>> check_batch_bytes(None, int8_model=int8, half_model=half, positions=8, batch=4)
        'Exercise 1: not answered yet.'
    """
    for label, model in (("int8_model", int8_model), ("half_model", half_model)):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"{label} must be the exercise's model (a torch.nn.Module); got {type(model).__name__}"
            )
    for label, count in (("positions", positions), ("batch", batch)):
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"{label} must be a positive int; got {count!r}")
    if prediction is None:
        return "Exercise 1: not answered yet."
    if not isinstance(prediction, int | float) or isinstance(prediction, bool) or not 0 <= prediction <= 200:
        raise ValueError(f"prediction must be a percentage (a number from 0 to 200); got {prediction!r}")
    if 0 < prediction <= 1:
        raise wrong_answer(
            1, f"{prediction!r} looks like a fraction", "give a percentage: 50 for half, not 0.5"
        )
    int8_step = decode_step_bytes(int8_model, positions, batch=batch)
    half_step = decode_step_bytes(half_model, positions, batch=batch)
    percent = 100 * sum(int8_step.values()) / sum(half_step.values())
    hint = (
        "int8 shrinks only the weights (and adds their scales); the KV cache is bfloat16 in both "
        "models and grows with the batch, the weights do not: add up each part as section 3 lists them"
    )
    if abs(prediction - percent) > 2:
        raise wrong_answer(1, f"{prediction!r} is too {'high' if prediction > percent else 'low'}", hint)
    return "Exercise 1: correct."


def _mlp_layers(int8_layers: Sequence[str], n_layer: int, label: str) -> list[str]:
    """The int8 layers' names, once they are every MLP layer of every block and nothing else."""
    if not isinstance(n_layer, int) or isinstance(n_layer, bool) or n_layer < 1:
        raise ValueError(f"n_layer must be a positive int; got {n_layer!r}")
    if (
        not isinstance(int8_layers, Sequence)
        or isinstance(int8_layers, str)
        or not all(isinstance(n, str) for n in int8_layers)
    ):
        raise TypeError(
            f"int8_layers must be the names of your model's int8 layers (a list of str); got {int8_layers!r}"
        )
    names = list(int8_layers)
    outside = [n for n in names if ".mlp." not in f".{n}."]
    hint = "Hint: only= is called with each layer's name (see tiny.named_modules()): keep the MLPs'."
    if outside:  # the messages name no count: the number of int8 layers is the answer
        raise AssertionError(f"{label}: some int8 layers are outside the MLPs (e.g. {outside[0]}). {hint}")
    if len(names) != 2 * n_layer:
        raise AssertionError(f"{label}: not every MLP layer of every block is int8. {hint}")
    return names


def check_mlp_only(
    prediction: int | None,
    generated_code: str | None,
    *,
    int8_layers: Sequence[str],
    n_layer: int,
    unchecked: str | None = None,
) -> str:
    """Exercise 2: fused int8 kernel calls when only the MLP's two linear layers are quantized.

    ``int8_layers`` names the int8 layers of the learner's model (from ``named_modules()``),
    ``n_layer`` its blocks: a model quantized anywhere but the MLPs (the attention layers,
    say, which are as many) is rejected before the prediction is read. ``unchecked`` is
    ``helpers.quantize.int8_fusion_unchecked("cpu", torch.bfloat16)``: where it gives a reason,
    the pattern cannot fire here, so the prediction is held to the calls the generated code
    makes (none) and the reason is said.

    Example:
        >>> code = "extern_kernels._weight_int8pack_mm(a)\\n" * 4
        >>> names = [f"transformer.h.{i}.mlp.{n}" for i in range(2) for n in ("c_fc", "c_proj")]
        >>> check_mlp_only(4, code, int8_layers=names, n_layer=2)
        'Exercise 2: correct.'
    """
    if prediction is None:
        return "Exercise 2: not answered yet."
    _prediction(prediction)
    names = _mlp_layers(int8_layers, n_layer, "Exercise 2")
    if unchecked is not None and not isinstance(unchecked, str):
        raise TypeError(f"unchecked must be None or a reason (str); got {unchecked!r}")
    if generated_code is None:
        raise ValueError("generated_code must be the code Inductor generated for your model once answered")
    calls = fused_int8_calls(generated_code)
    if unchecked:  # the pattern cannot fire here: the answer is what this machine's code calls
        hint = f"the int8 pattern cannot fire here ({unchecked}): what does the generated code call?"
        return f"{check_answer(2, prediction, calls, hint=hint)} (the pattern cannot fire here: {unchecked})"
    if calls != len(names):
        raise AssertionError(
            "Exercise 2: the generated code does not call the fused kernel once per int8 layer: "
            "were the activations bfloat16?"
        )
    return check_answer(
        2, prediction, calls, hint="count the int8 layers of your model (print it): each is one call"
    )


def check_float32_activations(
    prediction: int | None, generated_code: str | None, *, int8_layers: Sequence[str], n_layer: int
) -> str:
    """Exercise 2, second part: fused int8 kernel calls of the MLP-only model with float32 activations.

    ``generated_code`` is the code Inductor generated for a float32 copy of the learner's model
    (``.float()`` converts the activations' side, the scales; the int8 weights stay): the answer is
    the fused calls it makes, counted, not assumed. ``int8_layers`` and ``n_layer`` are checked as in
    :func:`check_mlp_only`: the model must be the first part's.

    Example:
        >>> names = [f"transformer.h.{i}.mlp.{n}" for i in range(2) for n in ("c_fc", "c_proj")]
        >>> check_float32_activations(None, None, int8_layers=names, n_layer=2)
        'Exercise 2 (float32 activations): not answered yet.'
        >>> check_float32_activations(0, "cpp_fused_mul_0(const int8_t* x)", int8_layers=names, n_layer=2)
        'Exercise 2 (float32 activations): correct.'
    """
    label = "2 (float32 activations)"
    if prediction is None:
        return f"Exercise {label}: not answered yet."
    _prediction(prediction)
    _mlp_layers(int8_layers, n_layer, f"Exercise {label}")
    if generated_code is None:
        raise ValueError("generated_code must be the code Inductor generated for the float32 model")
    hint = "section 2 says which activations the pattern needs"
    return check_answer(label, prediction, fused_int8_calls(generated_code), hint=hint)
