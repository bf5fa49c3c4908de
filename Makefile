# Every target creates .venv and installs the project first, so a fresh clone needs
# nothing but python3 (>= 3.10) and make.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test test-all bench probe clean

# The compiled core (setup.py) is built by the install, so a change of a compiled module
# or of its types (.pxd) installs again; without a build rnicsim warns and runs pure Python.
CORE    := setup.py $(wildcard rnicsim/hw/*.pxd) $(patsubst %.pxd,%.py,$(wildcard rnicsim/hw/*.pxd))

$(STAMP): pyproject.toml $(CORE)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/rnicsim run scenarios/drtmh/fig5a_raw_verbs.yaml --out out/fig5a --set run.size=demo --jobs 2
	$(BIN)/rnicsim perftest ib_read_lat --nic cx3-qdr -a --out out/perftest_ib_read_lat_cx3-qdr.txt
	@echo "demo results and plots are in out/"

# The suite runs on every core (pytest-xdist, one worker per core; worksteal balances the
# few long tests). TEST_WORKERS=0 runs it in one process; one test: `.venv/bin/python -m pytest -q PATH::NAME`.
TEST_WORKERS ?= auto

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -m '' -n $(TEST_WORKERS) --dist worksteal

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/rdmc_scale.py

probe:
	$(MAKE) -C calibration/probe

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
