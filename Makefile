# hcu — every target is re-runnable; each installs what it needs on a fresh Debian machine.
PY        ?= python3
VENV      ?= .venv
VPY       := $(VENV)/bin/python
TEST_DESKTOP_IMAGE ?= hcu-test-desktop:latest
QEMU_GUEST_IMAGE   ?= hcu-qemu-guest
QEMU_GUEST_DISK    ?= build/qemu-guest/test-desktop.qcow2

.PHONY: setup host docker test-desktop qemu-guest build-local agents demo test test-fast bench lint clean-guests

## host: Debian packages and a running Docker engine
host:
	bash scripts/setup-host.sh

## setup: the venv with hcu, its test clients and OSWorld's evaluator code (desktop-env, light install)
setup: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml requirements-osworld.txt
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test]'
	$(VPY) -m pip install -q -r requirements-osworld.txt
	$(VPY) -m pip install -q --no-deps desktop-env==1.0.2
	touch $@

## test-desktop: the local stand-in for the official OSWorld guest (debootstrap + docker import)
test-desktop: host
	bash scripts/test-desktop/build.sh $(TEST_DESKTOP_IMAGE)

## qemu-guest: the QEMU stand-in for the official guest: a runner image with the osworld-docker contract
## ($(QEMU_GUEST_IMAGE):latest on KVM, :tcg asking for TCG) and a bootable qcow2 of the test desktop
qemu-guest: host test-desktop
	bash scripts/qemu-guest/build.sh $(QEMU_GUEST_IMAGE) $(QEMU_GUEST_DISK) $(TEST_DESKTOP_IMAGE)

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
test: setup host test-desktop qemu-guest build-local agents
	$(VPY) -m ruff check hcu tests bench scripts
	$(VPY) -m pytest -q -p no:cacheprovider

## test-fast: pure-logic tests only
test-fast: setup
	$(VPY) -m pytest -q -m 'not docker and not cli'

## bench: benchmarks print figures and ratios (never asserted)
bench: setup host test-desktop qemu-guest build-local
	$(VPY) bench/run_all.py

lint: setup
	$(VPY) -m ruff check hcu tests bench scripts

## clean-guests: remove every container, volume and overlay hcu started
clean-guests: setup
	$(VPY) -m hcu.osworld.cleanup --all
