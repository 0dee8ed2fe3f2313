"""The notebook's environment: set it up (device, seed, precision, the guard) and describe it.

:func:`setup_notebook` is what every notebook runs first; :func:`environment_card` is what it
prints next (versions, device, hardware, the machine's load, the guard's verdict).
"""

from __future__ import annotations

import os
import platform
import sys
import warnings
from importlib import metadata

import torch

from helpers.device import GPU_PROFILE_ENV_VAR, GPU_PROFILES, gpu_profile, normalize_device
from helpers.guard import (
    DEVICE_ENV_VAR,
    MIN_TORCH,
    compile_support,
    parse_version,
    skip_marked_cells,
    torch_version,
)


def cpu_name() -> str:
    """The CPU's model name, as the OS reports it (``"unknown CPU"`` if it does not).

    Example:
        >>> isinstance(cpu_name(), str)
        True
    """
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def hardware_name(device: str | torch.device | None = None) -> str:
    """A short name for the hardware a measurement ran on, for plot titles.

    Example:
        >>> hardware_name("cpu").startswith("CPU")
        True
    """
    name = normalize_device(device)
    if name == "cuda" and torch.cuda.is_available():
        profile = gpu_profile()
        answering = (
            f" answering as a {GPU_PROFILES[profile][1]} ({GPU_PROFILE_ENV_VAR}={profile})" if profile else ""
        )
        return f"GPU: {torch.cuda.get_device_name()}{answering}"
    if name == "mps":
        return f"Apple GPU (MPS) on {platform.machine()}"
    threads = torch.get_num_threads()
    return f"CPU: {cpu_name()}, {threads} thread{'' if threads == 1 else 's'}"


#: The oldest transformers the course runs on (requirements.txt's lower bound; a test keeps them equal).
MIN_TRANSFORMERS = "4.56"


def transformers_advice() -> str | None:
    """One sentence saying what to run when transformers is missing or older than the course's floor.

    Colab ships its own transformers; the notebooks build GPT-2 with APIs from 4.56 on.

    Example:
        >>> transformers_advice() is None  # the installed transformers is recent enough
        True
    """
    installed = _version("transformers")
    if installed != "not installed" and parse_version(installed) >= parse_version(MIN_TRANSFORMERS):
        return None
    return (
        f"This course needs transformers >= {MIN_TRANSFORMERS} and found {installed}: run "
        f"`pip install -q 'transformers>={MIN_TRANSFORMERS}'` (in a notebook: `%pip install ...`), "
        "then restart the kernel (on Colab: Runtime > Restart session)."
    )


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_load(sample_s: float = 0.5) -> str:
    """How busy the machine is: the 1-minute load average and the CPU use sampled right now.

    Timings taken on a busy machine can be several times slower, so every environment card
    shows this. The sample is taken while this process sleeps, so it is everyone else's load.

    Example:
        >>> "load average" in machine_load(0.1)
        True
    """
    if not isinstance(sample_s, (int, float)) or not 0 < sample_s <= 10:
        raise ValueError(f"sample_s must be a number of seconds in (0, 10]; got {sample_s!r}")
    cpus = os.cpu_count() or 1
    try:
        load = f"{os.getloadavg()[0]:.2f}"
    except (AttributeError, OSError):  # Windows has no load average
        load = "n/a"
    import psutil

    busy = psutil.cpu_percent(interval=sample_s)
    return f"1-min load average {load} on {cpus} CPUs; CPU busy {busy:.0f}% over {sample_s:g} s"


def float32_matmul_setting() -> str:
    """The global float32 matmul precision, and what it means on each backend that reads it.

    ``torch.set_float32_matmul_precision("high")`` lets CUDA use TF32 and, from torch 2.9 on,
    also sets oneDNN's CPU float32 matmuls to TF32 (``torch.backends.mkldnn.matmul.fp32_precision``):
    on a CPU with a reduced-precision path float32 is then not exact float32.

    Example:
        >>> float32_matmul_setting().split()[0] in {"highest", "high", "medium"}
        True
    """
    text = torch.get_float32_matmul_precision()
    mkldnn = getattr(getattr(torch.backends.mkldnn, "matmul", None), "fp32_precision", None)
    if mkldnn is not None:
        text += f" (oneDNN CPU float32 matmul: {mkldnn})"
    return text


def environment_card(device: str | torch.device | None = None) -> str:
    """The versions, device and hardware a notebook ran with, as printable text.

    Example:
        >>> "torch" in environment_card("cpu")
        True
    """
    name = normalize_device(device)
    rows = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": _version("transformers"),
        "platform": f"{platform.system()} {platform.machine()}",
        "device": name,
        "hardware": hardware_name(name),
        "cpu threads": str(torch.get_num_threads()),
        "float32 matmul": float32_matmul_setting(),
        "load": machine_load(),
        "compile": str(compile_support(name)),
    }
    width = max(map(len, rows))
    return "\n".join(f"{key:<{width}} : {value}" for key, value in rows.items())


def setup_notebook(device: str | torch.device | None = None, seed: int = 0) -> str:
    """What every notebook does first: pick a device, seed, set precision, apply the guard.

    Seeding is ``transformers.set_seed(seed)`` (Python's ``random``, NumPy and torch on every
    device). String hashing is seeded by ``PYTHONHASHSEED`` when the interpreter starts; setting
    it in a running process changes nothing, so this does not try.

    The device is ``device``, else ``$COURSE_DEVICE``, else the best one available. The guard's
    verdict for it decides whether cells marked ``# requires: inductor`` run (see
    :func:`helpers.guard.skip_marked_cells`).

    ``torch.set_float32_matmul_precision("high")`` lets Ampere+ GPUs use TF32 and stops
    Inductor's TF32 notice from appearing on one machine and not another; from torch 2.9 on it
    also lets oneDNN's CPU float32 matmuls use a reduced-precision path where the CPU has one.
    The environment card prints the setting (``float32 matmul``). In a notebook it also makes
    ``display(fig)`` render the helpers' figures inline. Returns the device type.

    Example:
        >>> setup_notebook("cpu")
        'cpu'
    """
    if device is None:
        device = os.environ.get(DEVICE_ENV_VAR) or None
    name = normalize_device(device)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int; got {seed!r}")
    if torch_version() < parse_version(MIN_TORCH):
        print(
            f"This course is tested on torch >= {MIN_TORCH}; this is torch {torch.__version__}. "
            f"Some cells may fail: pip install 'torch>={MIN_TORCH}' (on Colab: Runtime > Change runtime)."
        )
    advice = transformers_advice()
    if advice:
        raise SystemExit(advice)
    with warnings.catch_warnings():
        # tqdm.auto, imported by transformers, warns when ipywidgets is missing (a machine's path in it).
        warnings.filterwarnings("ignore", message="IProgress not found")
        from transformers import set_seed

    set_seed(seed)
    # Under a GPU profile without TF32 (a T4), the real card must not use it either.
    profile = gpu_profile() if name == "cuda" else None
    tf32 = profile is None or GPU_PROFILES[profile][0] >= (8, 0)
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    _show_figures_inline()
    verdict = compile_support(name)
    skip_marked_cells(verdict, verdict if name == "cpu" else compile_support("cpu"))
    return name


def _show_figures_inline() -> None:
    # The plot helpers build Figures without pyplot; in a notebook, register the inline
    # formatter so that display(fig) renders an image rather than "<Figure ...>".
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and hasattr(shell, "kernel"):
        shell.run_line_magic("matplotlib", "inline")
