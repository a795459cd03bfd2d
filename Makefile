# memlane — every target sets up what it needs (a .venv with the project and its dev extras).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench,semantic]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m node.demo

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check protocol node tests
	$(VENV)/bin/ruff format --check protocol node tests
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m tests.bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
