# The README's two commands: `make demo` and `make test`. Each builds .venv on its own.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
DEMO_STAMP := $(VENV)/.demo-installed
TEST_STAMP := $(VENV)/.test-installed

.PHONY: demo test lint bench clean

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Error: $(PYTHON) not found; install Python 3.11 or run make PYTHON=python3" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)

# The demo needs the package and its `demo` extra only. uv (from PyPI) installs them in about
# ten seconds where pip takes two minutes; pip is the fallback where uv cannot be installed.
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	@if $(BIN)/python -m pip install --quiet uv; then \
		$(BIN)/uv pip install --python $(BIN)/python --quiet -e '.[demo]'; \
	else \
		$(BIN)/python -m pip install --quiet -e '.[demo]'; \
	fi
	touch $(DEMO_STAMP)

# The tests need the whole development stack (torch's CPU wheel comes from pip's local links).
$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,demo]'
	@# tests/review drive Debian's chromium through Playwright (never `playwright install`).
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi
	touch $(TEST_STAMP) $(DEMO_STAMP)

demo: $(DEMO_STAMP)
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
