"""The models the notebooks share, sized by device so CPU runs fit the time budget.

Nothing is downloaded: the GPT-2 is built from a ``transformers`` config with random
weights, and the real loading path (``save_pretrained`` / ``from_pretrained``) is used
on a local folder.
"""

from __future__ import annotations

import contextlib
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn

from helpers.device import normalize_device


class TinyMLP(nn.Module):
    """A stack of ``Linear -> LayerNorm -> GELU`` blocks: matmuls plus pointwise work to fuse.

    Example:
        >>> TinyMLP(width=16, depth=2)(torch.randn(4, 16)).shape
        torch.Size([4, 16])
    """

    def __init__(self, width: int = 512, depth: int = 4) -> None:
        super().__init__()
        for label, value in (("width", width), ("depth", depth)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{label} must be a positive int; got {value!r}")
        self.blocks = nn.Sequential(
            *(nn.Sequential(nn.Linear(width, width), nn.LayerNorm(width), nn.GELU()) for _ in range(depth))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x) + x


@dataclass(frozen=True)
class MLPSize:
    """Width, depth and batch of the course's MLP on one device."""

    width: int
    depth: int
    batch: int


@dataclass(frozen=True)
class GPT2Size:
    """The shape of the course's GPT-2 and of its input batch on one device."""

    n_layer: int
    n_embd: int
    n_head: int
    vocab_size: int
    n_positions: int
    batch: int
    seq_len: int


# Chosen so that each CPU notebook fits 3 minutes on 2 cores while compiling still shows
# its effect (on tiny inputs Python overhead dominates and compiled code can lose).
_MLP_SIZES = {
    "cpu": MLPSize(width=512, depth=4, batch=256),
    "cuda": MLPSize(width=2048, depth=8, batch=1024),
    "mps": MLPSize(width=1024, depth=8, batch=512),
}
_GPT2_SIZES = {
    "cpu": GPT2Size(n_layer=6, n_embd=384, n_head=6, vocab_size=8192, n_positions=256, batch=8, seq_len=128),
    "cuda": GPT2Size(
        n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024, batch=16, seq_len=512
    ),
    "mps": GPT2Size(
        n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024, batch=8, seq_len=256
    ),
}


def mlp_size(device: str | torch.device | None = None) -> MLPSize:
    """The MLP size the course uses on ``device``.

    Example:
        >>> mlp_size("cpu").width
        512
    """
    return _MLP_SIZES[normalize_device(device)]


def gpt2_size(device: str | torch.device | None = None, **overrides: int) -> GPT2Size:
    """The GPT-2 size the course uses on ``device``, with any field overridden.

    Example:
        >>> gpt2_size("cpu", n_layer=2).n_layer
        2
    """
    size = _GPT2_SIZES[normalize_device(device)]
    unknown = set(overrides) - set(GPT2Size.__dataclass_fields__)
    if unknown:
        accepted = ", ".join(GPT2Size.__dataclass_fields__)
        raise ValueError(f"unknown GPT2Size field(s) {sorted(unknown)}; accepted: {accepted}")
    for key, value in overrides.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{key} must be a positive int; got {value!r}")
    size = replace(size, **overrides)
    if size.n_embd % size.n_head:
        raise ValueError(f"n_embd ({size.n_embd}) must be divisible by n_head ({size.n_head})")
    if size.seq_len > size.n_positions:
        raise ValueError(f"seq_len ({size.seq_len}) must be <= n_positions ({size.n_positions})")
    return size


def build_mlp(device: str | torch.device | None = None, seed: int = 0) -> tuple[TinyMLP, torch.Tensor]:
    """The course's MLP in eval mode on ``device`` and an input batch for it.

    Example:
        >>> model, x = build_mlp("cpu")
        >>> model(x).shape == x.shape
        True
    """
    name = normalize_device(device)
    _check_seed(seed)
    size = mlp_size(name)
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyMLP(size.width, size.depth)
    x = torch.randn(size.batch, size.width, generator=generator)
    return model.eval().to(name), x.to(name)


def gpt2_config(size: GPT2Size):
    """A ``transformers.GPT2Config`` for ``size`` (token ids inside the small vocabulary).

    Example:
        >>> gpt2_config(gpt2_size("cpu")).n_layer
        6
    """
    if not isinstance(size, GPT2Size):
        raise TypeError(f"size must be a GPT2Size (see gpt2_size()); got {type(size).__name__}")
    with _quiet_transformers():
        from transformers import GPT2Config
    last_token = size.vocab_size - 1
    return GPT2Config(
        n_layer=size.n_layer,
        n_embd=size.n_embd,
        n_head=size.n_head,
        vocab_size=size.vocab_size,
        n_positions=size.n_positions,
        bos_token_id=last_token,
        eos_token_id=last_token,
        pad_token_id=last_token,
    )


def build_gpt2(
    size: GPT2Size | None = None,
    *,
    device: str | torch.device | None = None,
    seed: int = 0,
    via_pretrained: bool = True,
    dropout: float | None = None,
):
    """A ``GPT2LMHeadModel`` with random weights, in eval mode on ``device``.

    With ``via_pretrained`` (the default) the model goes through the real loading path:
    ``save_pretrained`` to a temporary folder and ``from_pretrained`` back, as a model
    from the Hub would (without the download). ``dropout`` sets every dropout probability
    (``None`` keeps GPT-2's 0.1): training compared step by step, eager against compiled, needs
    ``dropout=0.0``, since compiled code draws its random numbers differently. The weights
    depend only on ``seed``: two calls give two identical, independent models. Call ``.train()``
    to train it.

    Example:
        >>> model = build_gpt2(gpt2_size("cpu", n_layer=1, n_embd=64, n_head=2), device="cpu", dropout=0.0)
        >>> model.config.n_layer, model.training, model.config.attn_pdrop
        (1, False, 0.0)
    """
    name = normalize_device(device)
    size = size or gpt2_size(name)
    _check_seed(seed)
    if dropout is not None and (
        not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0 <= dropout < 1
    ):
        raise ValueError(
            f"dropout must be a probability in [0, 1) or None (GPT-2's default); got {dropout!r}"
        )
    config = gpt2_config(size)
    if dropout is not None:
        config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = float(dropout)
    with _quiet_transformers(), torch.random.fork_rng(devices=[]):
        from transformers import GPT2LMHeadModel

        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
    if via_pretrained:
        with tempfile.TemporaryDirectory(prefix="course-gpt2-") as folder:
            model = save_and_reload(model, folder)
    # transformers picks the loss from the class name; "GPT2LMHeadModel" matches none, so it
    # would warn once and use the causal-LM loss. Name that loss explicitly instead.
    model.loss_type = "ForCausalLM"
    return model.eval().to(name)


def save_and_reload(model, folder: str | Path):
    """``model.save_pretrained(folder)`` then ``type(model).from_pretrained(folder)``.

    Example:
        >>> import tempfile
        >>> small = build_gpt2(gpt2_size("cpu", n_layer=1, n_embd=64, n_head=2), via_pretrained=False)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     again = save_and_reload(small, folder)
        >>> torch.equal(again.lm_head.weight, small.lm_head.weight)
        True
    """
    if not hasattr(model, "save_pretrained"):
        raise TypeError(f"model must be a transformers PreTrainedModel; got {type(model).__name__}")
    if not isinstance(folder, (str, Path)):
        raise TypeError(f"folder must be a directory path (str or pathlib.Path); got {type(folder).__name__}")
    folder = Path(folder)
    with _quiet_transformers():
        model.save_pretrained(folder)
        return type(model).from_pretrained(folder)


def _check_seed(seed: int) -> None:
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int; got {seed!r}")


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No progress bars (stderr noise that differs by machine) while building and loading."""
    with warnings.catch_warnings():
        # tqdm.auto warns once, on import, when ipywidgets is missing, even with bars disabled.
        warnings.filterwarnings("ignore", message="IProgress not found")
        from transformers.utils import logging as hf_logging

        was_enabled = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            yield
        finally:
            if was_enabled:
                hf_logging.enable_progress_bar()


def random_tokens(
    size: GPT2Size,
    *,
    device: str | torch.device | None = "cpu",
    seed: int = 0,
    batch: int | None = None,
    seq_len: int | None = None,
) -> torch.Tensor:
    """A ``(batch, seq_len)`` batch of random token ids for a model of ``size``.

    Example:
        >>> random_tokens(gpt2_size("cpu"), batch=2, seq_len=5).shape
        torch.Size([2, 5])
    """
    if not isinstance(size, GPT2Size):
        raise TypeError(f"size must be a GPT2Size (see gpt2_size()); got {type(size).__name__}")
    _check_seed(seed)
    batch = size.batch if batch is None else batch
    seq_len = size.seq_len if seq_len is None else seq_len
    for label, value in (("batch", batch), ("seq_len", seq_len)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{label} must be a positive int; got {value!r}")
    if seq_len > size.n_positions:
        raise ValueError(f"seq_len must be <= n_positions ({size.n_positions}); got {seq_len}")
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, size.vocab_size, (batch, seq_len), generator=generator)
    return tokens.to(normalize_device(device))
