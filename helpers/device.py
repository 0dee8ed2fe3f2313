"""The device every other module speaks of: which ones exist here, their names, waiting for them.

Nothing here calls a CUDA or MPS API that raises where the device is missing.
"""

from __future__ import annotations

import torch

#: Device types the course knows (and knows how to compile for).
ACCEPTED_DEVICES = ("cpu", "cuda", "mps")


def best_device() -> str:
    """The fastest device type this machine offers: ``"cuda"``, ``"mps"`` or ``"cpu"``.

    Example:
        >>> best_device() in ACCEPTED_DEVICES
        True
    """
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def normalize_device(device: str | torch.device | None) -> str:
    """Turn ``None``, ``"cuda:0"`` or ``torch.device("cpu")`` into a device type name.

    Raises ``ValueError`` for device types the course does not know.

    Example:
        >>> normalize_device("cuda:1")
        'cuda'
    """
    if device is None:
        return best_device()
    if isinstance(device, torch.device):
        name = device.type
    elif isinstance(device, str):
        name = device.strip().lower().split(":", 1)[0]
    else:
        raise TypeError(f"device must be a str, a torch.device or None; got {type(device).__name__}")
    if name not in ACCEPTED_DEVICES:
        accepted = ", ".join(repr(d) for d in ACCEPTED_DEVICES)
        raise ValueError(f"device must be one of {accepted} (or None for the best available); got {device!r}")
    return name


def synchronize(device: str | torch.device | None = "cpu") -> None:
    """Wait until ``device`` has finished queued work (a no-op on the CPU).

    Example:
        >>> synchronize("cpu")
    """
    name = normalize_device(device)
    if name == "cuda" and torch.cuda.is_available():
        torch.cuda.synchronize()
    elif name == "mps" and torch.backends.mps.is_available():
        torch.mps.synchronize()
