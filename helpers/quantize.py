"""Weight-only int8 quantization after gpt-fast's, for notebook 09: the model surgery, and the check that a
compiled step kept it.

- :func:`linearize`: GPT-2's ``Conv1D`` layers (weight ``in x out``) become ``nn.Linear``
  (``out x in``), the layout the int8 layer and Inductor's int8 pattern expect.
- :class:`WeightOnlyInt8Linear`: int8 weights and one float scale per output channel; its forward
  converts the weights to the activations' dtype, multiplies and scales (what Inductor fuses).
- :func:`quantize_int8`: a copy of a model with its ``nn.Linear`` layers (or some of them) in int8.
- :func:`relative_distance` and :func:`check_matches_eager`: compiled logits against eager ones,
  within a share of what quantizing moves them, so that a compiled step which lost its
  quantization (ran the unquantized weights) fails.
- :func:`int8_fusion_unchecked`: why a step here may not call Inductor's fused int8 kernel
  (``None`` where it must), so that a notebook asserts the fused calls only where they are due.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.nn.functional as F
from packaging.version import Version

from helpers.device import normalize_device
from helpers.guard import torch_version


def linearize(model: torch.nn.Module) -> torch.nn.Module:
    """Replace every transformers ``Conv1D`` (weight: in x out) with an ``nn.Linear`` (weight: out x
    in), in place; the outputs stay the same.

    Example:
        >>> from transformers.pytorch_utils import Conv1D
        >>> block = torch.nn.Sequential(Conv1D(4, 3))
        >>> type(linearize(block)[0]).__name__, tuple(block[0].weight.shape)
        ('Linear', (4, 3))
    """
    from transformers.pytorch_utils import Conv1D

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, Conv1D):
                linear = torch.nn.Linear(*child.weight.shape, device=child.weight.device)
                linear.weight.data = child.weight.data.t().contiguous()
                linear.bias.data = child.bias.data
                setattr(module, name, linear)
    return model


class WeightOnlyInt8Linear(torch.nn.Module):
    """A weight-only int8 linear layer after gpt-fast's: int8 weights, one float scale per output channel.

    Its forward is gpt-fast's (convert, multiply, scale) plus the bias GPT-2's layers have
    (gpt-fast's layer has none). The scale is symmetric: each row's largest absolute weight ÷ 127,
    so that weight becomes ±127 (gpt-fast's ``dynamically_quantize_per_channel`` divides by 127.5
    and clamps to -128..127).

    Example:
        >>> layer = WeightOnlyInt8Linear(torch.nn.Linear(8, 4))
        >>> layer.weight.dtype, tuple(layer.scales.shape), tuple(layer(torch.ones(2, 8)).shape)
        (torch.int8, (4,), (2, 4))
    """

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        if not isinstance(linear, torch.nn.Linear):
            raise TypeError(f"linear must be a torch.nn.Linear; got {type(linear).__name__}")
        weight = linear.weight.detach().float()  # (out_features, in_features)
        scales = weight.abs().amax(dim=1).clamp(min=1e-12) / 127  # each row's largest weight -> 127
        self.register_buffer("weight", torch.round(weight / scales[:, None]).to(torch.int8))
        self.register_buffer("scales", scales)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.weight.to(dtype=x.dtype)) * self.scales
        return y if self.bias is None else y + self.bias


def quantize_int8(model: torch.nn.Module, only: Callable[[str], bool] = lambda name: True) -> torch.nn.Module:
    """A copy of ``model`` whose ``nn.Linear`` layers, those whose dotted name passes ``only``, are
    :class:`WeightOnlyInt8Linear`. ``model`` itself is not changed.

    Example:
        >>> mlp = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        >>> [type(m).__name__ for m in quantize_int8(mlp, only=lambda name: name.endswith("2"))]
        ['Linear', 'ReLU', 'WeightOnlyInt8Linear']
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    if not callable(only):
        raise TypeError(f"only must be a function of a layer's name returning a bool; got {only!r}")
    quantized = copy.deepcopy(model)
    for parent_name, module in list(quantized.named_modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Linear) and only(f"{parent_name}.{name}".lstrip(".")):
                setattr(module, name, WeightOnlyInt8Linear(child))
    return quantized


def relative_distance(logits: torch.Tensor, reference: torch.Tensor) -> float:
    """``||logits - reference|| / ||reference||`` over every element, in float32.

    Example:
        >>> relative_distance(torch.tensor([3.0, 4.0]), torch.tensor([3.0, 0.0]))
        1.3333333730697632
    """
    if not (isinstance(logits, torch.Tensor) and isinstance(reference, torch.Tensor)):
        raise TypeError("logits and reference must be tensors")
    if logits.shape != reference.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} and reference {tuple(reference.shape)} differ in shape"
        )
    reference = reference.float()
    return ((logits.float() - reference).norm() / reference.norm()).item()


def check_matches_eager(
    compiled: torch.Tensor, eager: torch.Tensor, *, effect: float, share: float = 0.75
) -> float:
    """Assert that ``compiled`` logits lie within ``share`` of ``effect`` (a precision's
    :func:`relative_distance` from float32, eager) of ``eager``'s; return their distance.

    A compiled step that lost its quantization (it ran the unquantized weights) lies about one whole
    effect from the int8 eager logits, so it fails; compiled code that only rounds differently
    stays well inside.

    Example:
        >>> eager = torch.tensor([1.0, 2.0, 3.0])
        >>> round(check_matches_eager(eager * 1.001, eager, effect=0.02), 4)
        0.001
        >>> check_matches_eager(eager * 1.02, eager, effect=0.02)
        Traceback (most recent call last):
        AssertionError: compiled logits lie 0.0200 from eager's (relative), more than 0.75 of ...
    """
    if not isinstance(effect, float) or not effect > 0:
        raise ValueError(f"effect must be a positive float; got {effect!r}")
    if not isinstance(share, float) or not 0 < share < 1:
        raise ValueError(f"share must be a float between 0 and 1; got {share!r}")
    distance = relative_distance(compiled, eager)
    if distance > share * effect:
        raise AssertionError(
            f"compiled logits lie {distance:.4f} from eager's (relative), more than {share} of the "
            f"effect ({effect:.4f})"
        )
    return distance


def int8_fusion_unchecked(device: str | torch.device | None, activations: torch.dtype) -> str | None:
    """Why Inductor may not fuse a weight-only int8 layer into ``_weight_int8pack_mm`` here, or
    ``None`` where it does on every release the course accepts (so the count can be asserted).

    The pattern (``_is_valid_woq_optimization_pattern`` in ``torch/_inductor/fx_passes/
    quantization.py``) wants bfloat16 activations and scales on a ``cpu`` tensor, also ``cuda``
    from torch 2.10 and ``xpu`` from 2.11. Inductor registers it once per process, at its first
    compile (``lazy_init`` in ``fx_passes/post_grad.py``): with oneDNN built in, only if oneDNN is
    on then, and before 2.10 not on ACL, oneDNN's ARM backend (``_mkldnn_fusion_init`` in
    ``fx_passes/mkldnn_fusion.py``); without oneDNN, from 2.12 (``lazy_init``'s ``else`` branch).
    Read in the source of every release from 2.8 to 2.15.

    Example:
        >>> int8_fusion_unchecked("cpu", torch.float32)
        'float32 activations: the pattern wants bfloat16'
    """
    if not isinstance(activations, torch.dtype) or not activations.is_floating_point:
        raise TypeError(f"activations must be a floating torch.dtype (torch.bfloat16); got {activations!r}")
    name = normalize_device(device)
    if activations != torch.bfloat16:
        return f"{str(activations).removeprefix('torch.')} activations: the pattern wants bfloat16"
    if name == "mps":
        return "on mps: the pattern matches cpu, cuda and xpu tensors only"
    if name != "cpu":
        return f"on {name}: counted, asserted on a CPU only (cuda tensors match from torch 2.10, xpu 2.11)"
    version = torch_version()
    if not torch._C._has_mkldnn:  # lazy_init's else branch registers it from 2.12
        before = version < Version("2.12")
        return "a build without oneDNN: torch before 2.12 does not register the pattern" if before else None
    if not torch.backends.mkldnn.enabled:
        return "oneDNN is off (torch.backends.mkldnn.enabled): Inductor does not register the pattern"
    if torch.ops.mkldnn._is_mkldnn_acl_supported() and version < Version("2.10"):
        return "on ACL, oneDNN's ARM backend: torch before 2.10 does not register the pattern"
    return None
