"""Self-checks of notebook 09's exercises (weight-only int8 decoding, read from generated code).

Each check reads the code Inductor generated for the learner's model (the notebook passes it
in, from ``helpers.logs.generated_code``), so the checks are fast to test.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from helpers.exercises import check_answer

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


def check_float32_activations(
    prediction: int | None,
    generated_code: str | None,
    *,
    activation_dtype: torch.dtype,
    n_int8_layers: int,
) -> str:
    """Exercise 1: fused int8 kernel calls when the int8 model keeps float32 activations.

    ``activation_dtype`` is the learner's model's floating dtype (its token embedding's);
    ``n_int8_layers`` how many int8 layers it has (a model left unquantized is rejected);
    ``generated_code`` what Inductor generated for one step of it (``None`` while unanswered).

    Example:
        >>> check_float32_activations(None, None, activation_dtype=torch.float32, n_int8_layers=9)
        'Exercise 1: not answered yet.'
        >>> code = "buf0 = extern_kernels.mm(arg0_1, buf1)"
        >>> check_float32_activations(0, code, activation_dtype=torch.float32, n_int8_layers=9)
        'Exercise 1: correct.'
    """
    if prediction is None:
        return "Exercise 1: not answered yet."
    _prediction(prediction)
    if not isinstance(activation_dtype, torch.dtype):
        raise TypeError(f"activation_dtype must be a torch.dtype; got {type(activation_dtype).__name__}")
    if not isinstance(n_int8_layers, int) or isinstance(n_int8_layers, bool) or n_int8_layers < 0:
        raise ValueError(f"n_int8_layers must be a count (an int >= 0); got {n_int8_layers!r}")
    if n_int8_layers == 0:
        raise AssertionError(
            "Exercise 1: your model has no int8 layer: nothing could fuse because nothing is int8. "
            "Hint: keep quantize_int8(tiny), drop only the .to(torch.bfloat16)."
        )
    if activation_dtype != torch.float32:
        raise AssertionError(
            f"Exercise 1: your model's activations are {activation_dtype}, not float32. "
            "Hint: quantize without converting the model with .to(torch.bfloat16)."
        )
    if generated_code is None:
        raise ValueError("generated_code must be the code Inductor generated for your model once answered")
    return check_answer(
        1,
        prediction,
        fused_int8_calls(generated_code),
        hint="the pattern matcher checks the activations' dtype before it fuses (quantization.py)",
    )


def check_mlp_only(
    prediction: int | None, generated_code: str | None, *, int8_layers: Sequence[str], n_layer: int
) -> str:
    """Exercise 2: fused int8 kernel calls when only the MLP's two linear layers are quantized.

    ``int8_layers`` names the int8 layers of the learner's model (from ``named_modules()``),
    ``n_layer`` its blocks: a model quantized anywhere but the MLPs (the attention layers,
    say, which are as many) is rejected before the prediction is read.

    Example:
        >>> code = "extern_kernels._weight_int8pack_mm(a)\\n" * 4
        >>> names = [f"transformer.h.{i}.mlp.{n}" for i in range(2) for n in ("c_fc", "c_proj")]
        >>> check_mlp_only(4, code, int8_layers=names, n_layer=2)
        'Exercise 2: correct.'
    """
    if prediction is None:
        return "Exercise 2: not answered yet."
    _prediction(prediction)
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
    hint = "Hint: pass only= a test on the layer's name ('.mlp.')."
    if outside:  # the messages name no count: the number of int8 layers is the answer
        raise AssertionError(f"Exercise 2: some int8 layers are outside the MLPs (e.g. {outside[0]}). {hint}")
    if len(names) != 2 * n_layer:
        raise AssertionError(f"Exercise 2: not every MLP layer of every block is int8. {hint}")
    if generated_code is None:
        raise ValueError("generated_code must be the code Inductor generated for your model once answered")
    calls = fused_int8_calls(generated_code)
    if calls != len(names):
        raise AssertionError(
            "Exercise 2: the generated code does not call the fused kernel once per int8 layer: "
            "were the activations bfloat16?"
        )
    return check_answer(
        2, prediction, calls, hint="one fused call per int8 layer, and only the MLPs are int8"
    )
