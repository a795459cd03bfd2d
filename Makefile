# memlane — every target sets up what it needs (a .venv with the project and its dev extras;
# for the tests, the TypeScript MCP client under tests/node/mcp_ts).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The official TypeScript MCP client the tests drive the server with: a pinned version, its
# dependencies fixed by package-lock.json (tests/node/test_mcp_outputs.py).
TS_CLIENT := tests/node/mcp_ts
TS_STAMP := $(TS_CLIENT)/node_modules/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench,semantic]'
	touch $(STAMP)

$(TS_STAMP): $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund
	touch $(TS_STAMP)

demo: $(STAMP)
	$(PY) -m node.demo

test: $(STAMP) $(TS_STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check protocol node tests
	$(VENV)/bin/ruff format --check protocol node tests
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m tests.bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(TS_CLIENT)/node_modules
