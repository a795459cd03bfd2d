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
# System tools the tests use: systemd-analyze (tests/node/test_deploy.py verifies
# deploy/memlane.service with it), from the systemd package; nft, from the nftables package
# (the fleet's packet loss and split partitions, tests/node/netns.py). Each installed with
# apt-get only where it is missing; where it is there nothing happens, and where there is no
# apt-get the test skips (and fails under CI=true).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: demo test lint bench clean system-tools browser-tools

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench,semantic,langgraph]'
	touch $(STAMP)

$(TS_STAMP): $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund
	touch $(TS_STAMP)

demo: $(STAMP)
	$(PY) -m node.demo

system-tools:
	@command -v systemd-analyze >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || { \
	    echo "installing systemd-analyze (the systemd package) with apt-get"; \
	    $(SUDO) apt-get update -qq && \
	    $(SUDO) apt-get install -y -qq --no-install-recommends systemd; }
	@command -v nft >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || { \
	    echo "installing nft (the nftables package) with apt-get"; \
	    $(SUDO) apt-get update -qq && \
	    $(SUDO) apt-get install -y -qq --no-install-recommends nftables; }

# The browser tests/browser/ drives: headless Chromium and its chromedriver, the distribution's
# chromium and chromium-driver packages. Installed with apt-get only where one is missing;
# where both are there nothing happens (and nothing is asked of the network), and where there
# is no apt-get the tests skip (and fail under CI=true).
browser-tools:
	@{ command -v chromium && command -v chromedriver; } >/dev/null 2>&1 || \
	    ! command -v apt-get >/dev/null 2>&1 || { \
	    echo "installing chromium and chromium-driver with apt-get"; \
	    $(SUDO) apt-get update -qq && \
	    $(SUDO) apt-get install -y -qq --no-install-recommends chromium chromium-driver; }

test: $(STAMP) $(TS_STAMP) system-tools browser-tools
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check protocol node tests
	$(VENV)/bin/ruff format --check protocol node tests
	$(VENV)/bin/mypy

bench: $(STAMP) system-tools
	$(PY) -m tests.bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(TS_CLIENT)/node_modules
