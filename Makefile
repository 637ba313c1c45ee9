# hcu — every target is re-runnable; each installs what it needs on a fresh Debian 12 machine (as root).
# Order: host (Debian packages, Docker engine) → the venv → what is built with it. A second run reuses all of it.
PY        ?= /usr/bin/python3
VENV      ?= .venv
VPY       := $(VENV)/bin/python
TEST_DESKTOP_IMAGE ?= hcu-test-desktop:latest
# The scripts find the venv's interpreter here.
export HCU_VENV_PYTHON := $(abspath $(VPY))

.PHONY: setup host test-desktop build-local agents demo test test-fast bench lint clean-guests FORCE

## host: Debian packages (python3-venv, Docker, npm, ...), a running Docker engine, guest-isolation iptables rules
host:
	bash scripts/setup-host.sh

## setup: the venv with hcu, its test clients and OSWorld's evaluator code (desktop-env, light install)
setup: $(VENV)/.installed
$(VENV)/.installed: $(VENV)/.base-python pyproject.toml requirements-osworld.txt
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test]'
	$(VPY) -m pip install -q -r requirements-osworld.txt
	$(VPY) -m pip install -q --no-deps desktop-env==1.0.2
	touch $@

# The venv is made from $(PY) (Debian's interpreter, never pyenv's); one made from another interpreter is rebuilt.
# The stamp changes (and so forces a reinstall) only when the base interpreter does.
$(VENV)/.base-python: FORCE | host
	@base="$$($(PY) -c 'import os, sys; print(os.path.realpath(sys.executable), sys.version.split()[0])')" \
	  || { echo "make: $(PY) does not run (set PY=/path/to/python3.10+)" >&2; exit 2; }; \
	if [ "$$(cat $@ 2>/dev/null)" != "$$base" ] || [ ! -x $(VPY) ]; then \
	  echo "make: venv $(VENV) from $$base"; \
	  rm -rf $(VENV) && $(PY) -m venv $(VENV) && echo "$$base" > $@; \
	fi

## test-desktop: the local stand-in for the official OSWorld guest (debootstrap + docker import)
test-desktop: host setup
	bash scripts/test-desktop/build.sh $(TEST_DESKTOP_IMAGE)

## build-local: artifacts/computer-use, one file for the guest's python3.10 and 3.11
build-local: setup
	bash scripts/build-computer-use.sh artifacts/computer-use

## agents: the four agent CLIs into artifacts/ from npm and PyPI
agents: host setup
	bash scripts/fetch-agents.sh artifacts

## demo: the built-in default panel (configs/demo.json) on the test desktop, ending in summary.md
demo: host setup test-desktop build-local agents
	bash scripts/demo.sh

## test: everything, including the Docker, desktop and CLI tests (none are skipped)
test: host setup test-desktop build-local agents
	$(VPY) -m ruff check hcu tests bench scripts
	$(VPY) -m pytest -q -p no:cacheprovider

## test-fast: pure-logic tests only
test-fast: setup
	$(VPY) -m pytest -q -m 'not docker and not cli'

## bench: benchmarks print figures and ratios (never asserted)
bench: host setup test-desktop build-local
	$(VPY) bench/run_all.py

lint: setup
	$(VPY) -m ruff check hcu tests bench scripts

## clean-guests: remove every container, volume and overlay hcu started
clean-guests: host setup
	$(VPY) -m hcu.osworld.cleanup --all
