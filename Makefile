# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv if missing and installs the pinned, tested versions into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS ?= dev,lab,trainers,ray
# two workers (the machine's two cores); a test file stays on one worker, so a file's
# servers and clusters (MLflow, Ray) start once
PYTEST_ARGS ?= -n 2 --dist loadfile

.PHONY: demo test lint bench bench-smoke install lab-suite clean constraints

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install -q -c constraints.txt -e ".[$(EXTRAS)]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/proxydiag demo

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check proxydiag tests benchmarks
	$(BIN)/ruff format --check proxydiag tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

bench-smoke: $(STAMP)
	$(BIN)/python -m benchmarks.run --smoke

# the lab needs torch (in the default EXTRAS; CPU build from this machine's local file)
lab-suite: $(STAMP)
	$(BIN)/proxydiag lab suite -o lab_runs --workers 2

# refresh the pins from the current venv (run after changing dependencies)
constraints:
	$(BIN)/pip freeze --exclude-editable | grep -v '^proxydiag' > constraints.txt

clean:
	rm -rf $(VENV) proxydiag-store demo-out
