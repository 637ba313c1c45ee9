# hcu — every target is re-runnable; each installs what it needs on a fresh Debian 12 machine (as root).
# Order: host (Debian packages, Docker engine) → the venvs → what is built with them. A second run reuses all of it.
PY        ?= /usr/bin/python3
VENV      ?= .venv
VPY       := $(VENV)/bin/python
OSWORLD_VENV ?= .venv-osworld
TEST_DESKTOP_IMAGE ?= hcu-test-desktop:latest
# The scripts find the venv's interpreter here.
export HCU_VENV_PYTHON := $(abspath $(VPY))
# No Debian ships CPython 3.10 (the official guest's python3): the artifact's 3.10 run is tested where one is
# found, $HCU_PYTHON310 (an install prefix) or pyenv's newest 3.10.
export HCU_PYTHON310 := $(or $(HCU_PYTHON310),$(lastword $(sort $(wildcard $(HOME)/.pyenv/versions/3.10.*))))
# Harbor (PyPI `harbor`: its ATIF models and validator, its job models, `harbor view`) needs CPython >= 3.12, which
# Debian 12 does not ship: the tests that read hcu's runs with Harbor's own code run where one is found,
# $HCU_PYTHON312 (an install prefix) or pyenv's newest 3.12 or later, in the venv $(HARBOR_VENV).
export HCU_PYTHON312 := $(or $(HCU_PYTHON312),$(lastword $(sort $(wildcard $(HOME)/.pyenv/versions/3.1[2-9].*))))
HARBOR_VENV ?= .venv-harbor
export HCU_HARBOR_PYTHON := $(abspath $(HARBOR_VENV))/bin/python
empty :=
space := $(empty) $(empty)
FAST_SELECTION := not docker and not kvm and not artifacts and not network and not osworld and not python310 and not browser and not harbor
UNTESTED_MARKERS := $(strip $(if $(HCU_PYTHON310),,python310) $(if $(HCU_PYTHON312),,harbor))
TEST_SELECTION := $(if $(UNTESTED_MARKERS),-m 'not $(subst $(space), and not ,$(UNTESTED_MARKERS))')

TEST_WORKERS ?= 4
# pytest-xdist workers for `make test`: most of its time waits on guests, timers and subprocesses, so more workers
# than this 2-core machine's cores (docs/contributing.md has the figures)
SETUP_JOBS ?= 3
# set-up targets built at once (they wait on the network, Docker and disk more than on the CPU)

QEMU_GUEST_IMAGE   ?= hcu-qemu-guest
QEMU_GUEST_DISK    ?= build/qemu-guest/test-desktop.qcow2

.PHONY: setup osworld-venv harbor-venv host test-desktop qemu-guest build-local agents demo test test-fast bench lint clean-guests FORCE

## host: Debian packages (python3-venv, Docker, npm, ...), a running Docker engine, guest-isolation iptables rules
host:
	bash scripts/setup-host.sh

## setup: the venv with hcu, its test clients and the ray executor (hcu[ray]), and the evaluator venv
setup: $(VENV)/.installed osworld-venv
$(VENV)/.installed: $(VENV)/.base-python pyproject.toml
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test,ray]'
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

## osworld-venv: the interpreter of OSWorld's setup/evaluator process: desktop-env 1.0.2 with all its
## dependencies (torch and easyocr included; ~7 GB, ~4-6 min the first time), and hcu itself
osworld-venv: $(OSWORLD_VENV)/.installed
$(OSWORLD_VENV)/.installed: requirements-osworld.txt pyproject.toml | host
	$(PY) -m venv $(OSWORLD_VENV)
	$(OSWORLD_VENV)/bin/python -m pip install -q --upgrade pip
	$(OSWORLD_VENV)/bin/python -m pip install -q -r requirements-osworld.txt
	$(OSWORLD_VENV)/bin/python -m pip install -q -e .
	touch $@

## harbor-venv: Harbor, pinned in requirements-harbor.txt, in its own venv from $(HCU_PYTHON312) (none: nothing
## to build, and `make test` says Harbor is not tested)
harbor-venv: $(if $(HCU_PYTHON312),$(HARBOR_VENV)/.installed)
$(HARBOR_VENV)/.installed: requirements-harbor.txt
	rm -rf $(HARBOR_VENV) && $(HCU_PYTHON312)/bin/python3 -m venv $(HARBOR_VENV)
	$(HARBOR_VENV)/bin/python -m pip install -q -r requirements-harbor.txt
	touch $@

## test-desktop: the local stand-in for the official OSWorld guest (debootstrap + docker import)
test-desktop: host
	bash scripts/test-desktop/build.sh $(TEST_DESKTOP_IMAGE)

## qemu-guest: the QEMU stand-in for the official guest: a runner image with the osworld-docker contract
## ($(QEMU_GUEST_IMAGE):latest on KVM, :tcg asking for TCG, :uefi and :uefi-tcg booting by UEFI) and a bootable
## qcow2 of the test desktop
qemu-guest: host test-desktop
	bash scripts/qemu-guest/build.sh $(QEMU_GUEST_IMAGE) $(QEMU_GUEST_DISK) $(TEST_DESKTOP_IMAGE)

## build-local: artifacts/computer-use, one file for the guest's python3.10 and 3.11
build-local: $(VENV)/.installed
	bash scripts/build-computer-use.sh artifacts/computer-use

## agents: every registered agent CLI's files into artifacts/ from npm and PyPI (the adapters declare them)
agents: host $(VENV)/.installed
	bash scripts/fetch-agents.sh artifacts

## demo: the built-in default panel (configs/demo.json) on the test desktop, ending in summary.md
demo: host
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) setup test-desktop build-local agents
	bash scripts/demo.sh

## test: everything, including the Docker, desktop and CLI tests (none are skipped), on TEST_WORKERS pytest-xdist
## workers; what it needs is built first, SETUP_JOBS targets at a time (each waits only on what it uses)
test: host
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) setup test-desktop qemu-guest build-local agents harbor-venv
	$(VPY) -m ruff check hcu tests bench scripts
	@$(if $(HCU_PYTHON310),echo "make test: the artifact's 3.10 run uses $(HCU_PYTHON310)",\
	  echo "make test: no CPython 3.10 here (set HCU_PYTHON310): the artifact's 3.10 run is NOT tested")
	@$(if $(HCU_PYTHON312),echo "make test: Harbor's models and viewer run on $(HCU_PYTHON312)",\
	  echo "make test: no CPython 3.12+ here (set HCU_PYTHON312): runs read by Harbor are NOT tested")
	$(VPY) -m pytest -q -p no:cacheprovider --durations=15 -n $(TEST_WORKERS) --dist loadgroup $(TEST_SELECTION)

## test-fast: pure-logic tests only (no Docker engine reachable, no artifacts, no network, no evaluator venv)
test-fast: $(VENV)/.installed
	DOCKER_HOST=unix:///nonexistent $(VPY) -m pytest -q -p no:cacheprovider -m "$(FAST_SELECTION)"

## bench: benchmarks print figures and ratios (never asserted)
bench: host setup test-desktop qemu-guest build-local
	$(VPY) bench/run_all.py

lint: setup
	$(VPY) -m ruff check hcu tests bench scripts

## clean-guests: remove every container, volume and overlay hcu started
clean-guests: host setup
	$(VPY) -m hcu.osworld.cleanup --all
