# Two commands for learners: `make lab` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: FORCE lab test unit test-portable test-colab test-fallback test-device test-compat test-rerun notebooks benchmark lint install clean

install: $(STAMP)

# Installs the course with the versions it was executed and tested with (constraints.txt).
# A .venv made by an unsupported Python (the pins need 3.11+) is rebuilt with $(PYTHON).
SUPPORTED := import sys; sys.exit(0 if sys.version_info >= (3, 11) else "the course needs Python 3.11+: make PYTHON=python3.12 ...")

VENV_PYTHON_OK := $(shell $(BIN)/python -c '$(SUPPORTED)' 2>/dev/null && echo yes)

# On Linux, plain pip pulls torch's CUDA build (several GB) even on a machine without a GPU. The
# committed outputs come from the CPU build, from PyTorch's CPU wheel index (about 200 MB). On Linux
# with no NVIDIA driver (no /proc/driver/nvidia, no nvidia-smi) that is the default; the install
# prints how it decided. `make TORCH_INDEX=cpu ...` forces it, `make TORCH_INDEX= ...` (empty) takes
# pip's default build, and any other value is used as the index URL itself.
ON_LINUX := $(filter Linux,$(shell uname -s 2>/dev/null))
NVIDIA_DRIVER := $(shell test -e /proc/driver/nvidia/version || command -v nvidia-smi >/dev/null 2>&1 && echo yes)
ifeq ($(origin TORCH_INDEX),undefined)
TORCH_INDEX := $(if $(ON_LINUX),$(if $(NVIDIA_DRIVER),,cpu),)
TORCH_INDEX_WHY := $(if $(ON_LINUX),$(if $(NVIDIA_DRIVER),an NVIDIA driver is here: pip's default (CUDA) build,no NVIDIA driver here (no /proc/driver/nvidia, no nvidia-smi): the CPU build),not Linux: pip's default build)
else
TORCH_INDEX_WHY := TORCH_INDEX=$(TORCH_INDEX) was given
endif
TORCH_INDEX_URL := $(if $(filter cpu,$(TORCH_INDEX)),https://download.pytorch.org/whl/cpu,$(TORCH_INDEX))

$(STAMP): requirements.txt constraints.txt pyproject.toml $(if $(VENV_PYTHON_OK),,FORCE)
	$(BIN)/python -c '$(SUPPORTED)' 2>/dev/null || rm -rf $(VENV)
	test -x $(BIN)/python || { $(PYTHON) -c '$(SUPPORTED)' && $(PYTHON) -m venv $(VENV); }
	@echo "torch: $(TORCH_INDEX_WHY)$(if $(TORCH_INDEX_URL), from $(TORCH_INDEX_URL))"
ifneq ($(TORCH_INDEX_URL),)
	$(BIN)/python -m pip install torch -c constraints.txt --index-url $(TORCH_INDEX_URL)
endif
	$(BIN)/python -m pip install -r requirements.txt -c constraints.txt
	# Build matplotlib's font cache now, so its one-time notice never lands in a notebook's stderr.
	$(BIN)/python -c "import matplotlib.pyplot"
	touch $(STAMP)

# Jupyter refuses to start as root (containers, some cloud VMs) unless told it may.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ALLOW_ROOT)

# Unit tests, doctests and every notebook under strict nbval (outputs compared).
test: $(STAMP)
	$(BIN)/python -m pytest

# Strict nbval once more under a lower CPU capability: ATen's kernels and Inductor's vector code
# (both read ATEN_CPU_CAPABILITY) take another path, so a compared output that depends on the CPU
# fails here on one machine instead of on the next contributor's. AVX512 -> avx2; else -> default.
# Always a fresh Inductor cache (the variable is unset, so conftest.py makes an empty one): an
# FX-graph entry is not keyed by the CPU's instruction set, and AVX512 code reused under avx2 gave
# NaN in 07's bfloat16 step and wrong bfloat16 values (16.3 for 1.09) in 10.
LOWER_CAPABILITY := import torch; print({"AVX512": "avx2"}.get(torch.backends.cpu.get_cpu_capability(), "default"))
test-portable: $(STAMP)
	env -u TORCHINDUCTOR_CACHE_DIR ATEN_CPU_CAPABILITY=$$($(BIN)/python -c '$(LOWER_CAPABILITY)') \
		$(BIN)/python -m pytest notebooks

# Colab, simulated: a fresh venv without the course, google.colab importable, COURSE_REPO a file://
# clone; notebook 01 must install the helpers from it and run to the end. Part of `make test` too.
test-colab: $(STAMP)
	$(BIN)/python -m pytest tests/test_colab_simulation.py

# The helpers' unit tests and doctests alone (seconds, no notebook).
unit: $(STAMP)
	$(BIN)/python -m pytest helpers tests

# Every notebook lax (cells run, asserts hold, outputs not compared) where compiling can't run:
# with the escape hatch (and no C++ compiler call allowed), then with no C++ compiler reachable.
test-fallback: $(STAMP)
	$(BIN)/python tools/run_notebooks.py --lax --fallback disabled
	$(BIN)/python tools/run_notebooks.py --lax --fallback no-compiler

# Every notebook lax on the best device here (a GPU or a Mac): what strict nbval cannot compare.
# It ends with a table (notebook, passed or failed, run time) naming the device: paste it into the
# README's "Measured on a GPU" section. Exits non-zero if a notebook failed.
test-device: $(STAMP)
	COURSE_DEVICE= $(BIN)/python tools/run_notebooks.py --lax

# Every notebook lax on the oldest and newest torch/transformers the course accepts (cached envs).
test-compat: $(STAMP)
	$(BIN)/python tools/compat.py --readme

# Every notebook lax, Run All twice in one kernel, the second time each code cell twice in a row
# (tools/rerun.py): what a learner who never restarts the kernel meets. Run it before committing
# outputs; it stays out of CI (it takes about three times `make notebooks`).
test-rerun: $(STAMP)
	$(BIN)/python tools/run_notebooks.py --rerun

# Re-execute every notebook in place, top to bottom, each with a cold Inductor cache.
notebooks: $(STAMP)
	$(BIN)/python tools/run_notebooks.py

# Time every notebook with a cold Inductor cache; writes only the README's run-time table.
benchmark: $(STAMP)
	$(BIN)/python tools/run_notebooks.py --benchmark --readme

lint: $(STAMP)
	$(BIN)/ruff check helpers tests tools notebooks conftest.py
	$(BIN)/ruff format --check helpers tests tools conftest.py

clean:
	rm -rf $(VENV)
