# hcu — every target is re-runnable; each installs what it needs on a fresh Debian machine.
PY        ?= python3
VENV      ?= .venv
VPY       := $(VENV)/bin/python
OSWORLD_VENV ?= .venv-osworld
TEST_DESKTOP_IMAGE ?= hcu-test-desktop:latest

.PHONY: setup osworld-venv host docker test-desktop build-local agents demo test test-fast bench lint clean-guests

## host: Debian packages and a running Docker engine
host:
	bash scripts/setup-host.sh

## setup: the venv with hcu and its test clients, and the evaluator venv
setup: $(VENV)/.installed osworld-venv
$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test]'
	touch $@

## osworld-venv: the interpreter of OSWorld's setup/evaluator process: desktop-env 1.0.2 with all its
## dependencies (torch and easyocr included; ~7 GB, ~4-6 min the first time), and hcu itself
osworld-venv: $(OSWORLD_VENV)/.installed
$(OSWORLD_VENV)/.installed: requirements-osworld.txt pyproject.toml
	$(PY) -m venv $(OSWORLD_VENV)
	$(OSWORLD_VENV)/bin/python -m pip install -q --upgrade pip
	$(OSWORLD_VENV)/bin/python -m pip install -q -r requirements-osworld.txt
	$(OSWORLD_VENV)/bin/python -m pip install -q -e .
	touch $@

## test-desktop: the local stand-in for the official OSWorld guest (debootstrap + docker import)
test-desktop: host
	bash scripts/test-desktop/build.sh $(TEST_DESKTOP_IMAGE)

## build-local: artifacts/computer-use, one file for the guest's python3.10 and 3.11
build-local: setup
	bash scripts/build-computer-use.sh artifacts/computer-use

## agents: the four agent CLIs into artifacts/ from npm and PyPI
agents:
	bash scripts/fetch-agents.sh artifacts

## demo: the built-in default panel (configs/demo.json) on the test desktop, ending in summary.md
demo: setup host test-desktop build-local agents
	bash scripts/demo.sh

## test: everything, including the Docker, desktop and CLI tests (none are skipped)
test: setup host test-desktop build-local agents
	$(VPY) -m ruff check hcu tests bench scripts
	$(VPY) -m pytest -q -p no:cacheprovider

## test-fast: pure-logic tests only (no Docker engine reachable, no artifacts, no network, no evaluator venv)
test-fast: $(VENV)/.installed
	DOCKER_HOST=unix:///nonexistent $(VPY) -m pytest -q -p no:cacheprovider \
	  -m 'not docker and not kvm and not artifacts and not network and not osworld and not python310'

## bench: benchmarks print figures and ratios (never asserted)
bench: setup host test-desktop build-local
	$(VPY) bench/run_all.py

lint: setup
	$(VPY) -m ruff check hcu tests bench scripts

## clean-guests: remove every container, volume and overlay hcu started
clean-guests: setup
	$(VPY) -m hcu.osworld.cleanup --all
