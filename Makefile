# Every target creates .venv and installs the project first, so a fresh clone needs
# nothing but python3 (>= 3.10) and make.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test test-all bench probe clean

# The compiled core (setup.py) is built by the install, so a change of a compiled module
# or of its types (.pxd) installs again; without a build rnicsim warns and runs pure Python.
CORE    := setup.py $(wildcard rnicsim/hw/*.pxd) $(patsubst %.pxd,%.py,$(wildcard rnicsim/hw/*.pxd)) \
           $(wildcard rnicsim/hw/*.pyx)

$(STAMP): pyproject.toml $(CORE)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The first minute (44 s on 2 cores shared with other work, 14 s of CPU): one READ's
# timeline, then the RDMC paper's reproduction at demo size (ten scenarios of about one
# point each) and its fig. 4 drawn (40 short points). DEMO_OUT: where it writes (tests/unit/test_make_demo.py runs the target
# into a temporary directory).
DEMO_OUT ?= out/demo

demo: $(STAMP)
	@mkdir -p $(DEMO_OUT)
	$(BIN)/rnicsim trace --nic cx4-edr --verb read --payload 8 --out $(DEMO_OUT)/read.json --pcap $(DEMO_OUT)/read.pcap
	$(BIN)/rnicsim reproduce rdmc --size demo --jobs 2 --out $(DEMO_OUT)/rdmc --quiet
	$(BIN)/rnicsim run scenarios/rdmc/fig4_group_size.yaml --set run.size=demo --jobs 2 --out $(DEMO_OUT)/rdmc_fig4 --quiet
	@echo "Shown: one 8-byte READ on ConnectX-4 EDR stage by stage (doorbell, PCIe, NIC, wire, responder, CQE, poll; open $(DEMO_OUT)/read.json in ui.perfetto.dev, $(DEMO_OUT)/read.pcap in Wireshark),"
	@echo "then RDMC's findings (binomial pipeline vs chain, tree and sequential send, block size, scale, interrupts) published vs measured (report: $(DEMO_OUT)/rdmc/report.md),"
	@echo "and RDMC fig. 4 drawn: each algorithm's completion time and bandwidth against group size ($(DEMO_OUT)/rdmc_fig4/*.png)"

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
