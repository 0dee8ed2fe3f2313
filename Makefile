# Two commands for learners: `make lab` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: lab test notebooks benchmark lint install clean

install: $(STAMP)

# Installs the course with the versions it was executed and tested with (constraints.txt).
$(STAMP): requirements.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
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

# Re-execute every notebook in place, top to bottom, each with a cold Inductor cache.
notebooks: $(STAMP)
	$(BIN)/python tools/run_notebooks.py

# Time every notebook with a cold Inductor cache; writes nothing.
benchmark: $(STAMP)
	$(BIN)/python tools/run_notebooks.py --benchmark

lint: $(STAMP)
	$(BIN)/ruff check helpers tests tools notebooks conftest.py
	$(BIN)/ruff format --check helpers tests tools conftest.py

clean:
	rm -rf $(VENV)
