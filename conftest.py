"""The strict run: the reference device (CPU), and one fresh Inductor cache so no result leans on
an earlier run."""

import os
import shutil
import tempfile

_fresh_cache = None


def pytest_configure(config):
    global _fresh_cache
    # Strict nbval compares outputs made on a Linux CPU: run the reference device even where a
    # GPU is present (`make test-device` runs the notebooks lax on the best device instead).
    # Forced, not defaulted: a COURSE_DEVICE=cuda left in the shell must not change the reference.
    os.environ["COURSE_DEVICE"] = "cpu"
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        _fresh_cache = tempfile.mkdtemp(prefix="course-pytest-inductor-")
        # Inherited by the notebook kernels nbval starts.
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = _fresh_cache


def pytest_unconfigure(config):
    if _fresh_cache:
        shutil.rmtree(_fresh_cache, ignore_errors=True)
