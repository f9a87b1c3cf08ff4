# The README's two commands: `make demo` and `make test`. Each builds .venv on its own.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
DEMO_STAMP := $(VENV)/.demo-installed
TEST_STAMP := $(VENV)/.test-installed

.PHONY: demo test lint bench clean

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Error: $(PYTHON) not found; install Python 3.11 or run make PYTHON=python3" >&2; exit 1; }
	@echo "make: creating the virtual environment $(VENV)"
	$(PYTHON) -m venv $(VENV)

# The demo needs the package and its `demo` extra only: scikit-learn, and the audit and plot
# extras it runs (numba, Pillow, matplotlib). uv (from PyPI) installs them in seconds where pip
# takes minutes; pip is the fallback where uv cannot be installed. Each step says what it does
# first. Measured from a fresh clone (README, "The two commands"): the installs 67 s, the whole
# first run 6 min 10 s on a 2-CPU machine busy with other work (1 min 46 s of CPU).
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	@echo "make demo: a first run installs 43 packages into $(VENV) (about a minute, some 230 MB to download), then runs the demo (about 1.5 minutes of CPU: a few minutes on a busy machine)"
	@echo "make demo: installing uv, a fast installer, into $(VENV)"
	@if $(BIN)/python -m pip install --quiet uv; then \
		echo "make demo: installing dsreg and its demo extra with uv: numpy, pyarrow, DuckDB, SciPy, scikit-learn, numba, matplotlib, Pillow and their dependencies"; \
		$(BIN)/uv pip install --python $(BIN)/python -e '.[demo]'; \
	else \
		echo "make demo: uv could not be installed; installing dsreg and its demo extra with pip instead (slower: a few minutes)"; \
		$(BIN)/python -m pip install -e '.[demo]'; \
	fi
	touch $(DEMO_STAMP)

# The tests need the whole development stack and every extra (torch's CPU wheel comes from
# pip's local links).
$(TEST_STAMP): pyproject.toml | $(BIN)/python
	@echo "make test: upgrading pip in $(VENV)"
	$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "make test: installing dsreg with every extra and the development stack (about 250 packages; a first run takes several minutes)"
	$(BIN)/python -m pip install --quiet -e '.[dev,all]'
	@# tests/review drive Debian's chromium through Playwright (never `playwright install`).
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make test: installing Debian's chromium for the browser tests"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi
	touch $(TEST_STAMP) $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	@echo "make demo: running demo/run.py (offline, output in demo/out)"
	$(BIN)/python demo/run.py

test: $(TEST_STAMP)
	$(BIN)/python -m pytest -q

lint: $(TEST_STAMP)
	$(BIN)/ruff check dsreg tests benchmarks demo docs/gen_cli.py
	$(BIN)/ruff format --check dsreg tests benchmarks demo docs/gen_cli.py
	$(BIN)/mypy
	$(BIN)/lint-imports

# Every side-by-side benchmark with targets (hours; run on demand, never in CI), listed in
# benchmarks/bench_all.py: all run, then the target fails if any missed a target. Figures:
# docs/benchmarks.md.
bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/bench_all.py

clean:
	rm -rf $(VENV) build dist demo/out
