# The README's two commands: `make demo` and `make test`. Each builds .venv on its own.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Error: $(PYTHON) not found; install Python 3.11 or run make PYTHON=python3" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,demo]'
	@# tests/review drive Debian's chromium through Playwright (never `playwright install`).
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python demo/run.py

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check dsreg tests benchmarks demo docs/gen_cli.py
	$(BIN)/ruff format --check dsreg tests benchmarks demo docs/gen_cli.py
	$(BIN)/mypy
	$(BIN)/lint-imports

# The side-by-side benchmarks (long; run on demand, never in CI). Figures: docs/benchmarks.md.
bench: $(STAMP)
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_detector.py compare
	$(BIN)/python benchmarks/bench_eval.py
	$(BIN)/python benchmarks/bench_remotes.py

clean:
	rm -rf $(VENV) build dist demo/out
