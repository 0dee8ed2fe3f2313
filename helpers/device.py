"""The device every other module speaks of: which ones exist here, their names, waiting for them.

Nothing here calls a CUDA or MPS API that raises where the device is missing.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator

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


@contextlib.contextmanager
def thread_count(threads: int | None) -> Iterator[None]:
    """torch's CPU thread count set to ``threads`` inside the block, then put back (``None``: unchanged).

    Compiled code guards on the thread count: a function compiled at one count compiles again
    at another.

    Example:
        >>> before = torch.get_num_threads()
        >>> with thread_count(1):
        ...     torch.get_num_threads()
        1
        >>> torch.get_num_threads() == before
        True
    """
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
        raise ValueError(f"threads must be a positive int or None (keep torch's setting); got {threads!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        yield
    finally:
        torch.set_num_threads(before)


#: ``COURSE_GPU_PROFILE`` makes the course's device queries answer like another GPU, so that a
#: branch written for it runs on the GPU at hand. It changes what the course asks, not the GPU:
#: Inductor's own capability checks, speed and memory stay those of the real card.
GPU_PROFILE_ENV_VAR = "COURSE_GPU_PROFILE"
#: name: (compute capability, display name); bfloat16 and TF32 follow from the capability
GPU_PROFILES = {"t4": ((7, 5), "Tesla T4")}


def gpu_profile() -> str | None:
    """The GPU the course's device queries answer for (``$COURSE_GPU_PROFILE``), or ``None``.

    Raises ``ValueError`` naming the variable and the accepted values for anything else.

    Example:
        >>> gpu_profile() is None or gpu_profile() in GPU_PROFILES
        True
    """
    value = os.environ.get(GPU_PROFILE_ENV_VAR, "").strip().lower()
    if not value:
        return None
    if value not in GPU_PROFILES:
        accepted = ", ".join(repr(name) for name in GPU_PROFILES)
        raise ValueError(f"{GPU_PROFILE_ENV_VAR} must be one of {accepted} or unset; got {value!r}")
    return value


def cuda_capability() -> tuple[int, int] | None:
    """The CUDA GPU's compute capability (the profile's under ``COURSE_GPU_PROFILE``), or ``None``.

    Example:
        >>> cuda_capability() is None or len(cuda_capability()) == 2
        True
    """
    if not torch.cuda.is_available():
        return None
    profile = gpu_profile()
    if profile is not None:
        return GPU_PROFILES[profile][0]
    major, minor = torch.cuda.get_device_capability()
    return major, minor


def native_bfloat16(device: str | torch.device | None = "cpu") -> bool:
    """Whether ``device`` computes in bfloat16 natively enough for the course to use it.

    CUDA needs compute capability 8.0 (Ampere): below it Inductor refuses to compile bfloat16
    ("does not support bfloat16 compilation natively") and runs the frame eagerly. MPS needs
    macOS 14. Every CPU runs bfloat16 (emulated where it has no bfloat16 instructions).

    Example:
        >>> native_bfloat16("cpu")
        True
    """
    name = normalize_device(device)
    if name == "cuda":
        capability = cuda_capability()
        return capability is not None and capability >= (8, 0)
    if name == "mps":
        return torch.backends.mps.is_available() and torch.backends.mps.is_macos_or_newer(14, 0)
    return True


def tf32_matmuls(device: str | torch.device | None = "cpu") -> bool:
    """Whether float32 matmuls on ``device`` run in TF32 now (10-bit mantissa inputs).

    True on a CUDA GPU of capability 8.0 or newer when the matmul precision is not ``"highest"``
    (``setup_notebook`` sets ``"high"``). On a CPU the course's checks measure instead (notebook 07).

    Example:
        >>> tf32_matmuls("cpu")
        False
    """
    if normalize_device(device) != "cuda":
        return False
    capability = cuda_capability()
    return (
        capability is not None and capability >= (8, 0) and torch.get_float32_matmul_precision() != "highest"
    )


def _onednn_tf32() -> bool:
    """Whether oneDNN may run CPU float32 matmuls in TF32 (the setting exists from torch 2.9)."""
    matmul = getattr(torch.backends.mkldnn, "matmul", None)
    return getattr(matmul, "fp32_precision", None) == "tf32"


def float32_tolerance(device: str | torch.device | None, full_precision: float) -> dict[str, float]:
    """``rtol``/``atol`` for comparing compiled float32 with eager float32 on ``device``.

    ``full_precision`` where float32 matmuls run in float32. Where they may run in TF32 (a CUDA GPU
    from Ampere on, or a CPU whose oneDNN float32 matmuls are set to ``"tf32"``, which
    ``torch.set_float32_matmul_precision("high")`` does from torch 2.9), eager and compiled round a
    matmul's inputs differently as soon as a fused kernel changes a last bit, so the tolerance is
    measured: ten times the relative error of one 512 x 512 matmul here (against float64 on the
    CPU), rounded up to a power of ten, and never below ``full_precision``. A CPU without TF32
    hardware keeps float32, so its measured tolerance stays ``full_precision``.

    Example:
        >>> float32_tolerance("cpu", 1e-4)
        {'rtol': 0.0001, 'atol': 0.0001}
    """
    if not isinstance(full_precision, float) or not 0 < full_precision < 1:
        raise ValueError(f"full_precision must be a float in (0, 1), such as 1e-4; got {full_precision!r}")
    name = normalize_device(device)
    if not (tf32_matmuls(name) or (name == "cpu" and _onednn_tf32())):
        return {"rtol": full_precision, "atol": full_precision}
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(512, 512, generator=generator) for _ in range(2))
    exact = a.double() @ b.double()
    error = ((a.to(name) @ b.to(name)).cpu().double() - exact).abs().max() / exact.abs().max()
    tolerance = max(full_precision, 10.0 ** math.ceil(math.log10(10 * error.item())))
    return {"rtol": tolerance, "atol": tolerance}
