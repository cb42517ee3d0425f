# Two entry points on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The modules setup.py compiles (mypyc, C helpers): editing one rebuilds the extensions, so a
# stale compiled copy never shadows the source.
COMPILED := $(shell grep -o '"[a-z_/0-9]*\.\(py\|c\)"' setup.py | tr -d '"')
PACKAGES := replica message_routing state_manager xnet consensus_stub examples

.PHONY: demo test setup clean bench chromium

$(STAMP): pyproject.toml setup.py $(COMPILED)
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	find $(PACKAGES) -name '*.so' -delete
	rm -f ./*__mypyc.*.so  # mypyc's shared library of several modules lives at the top
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/replica demo

# Headless Chromium for the status page's browser test, where it can be installed (the script
# says how to get it where it cannot, and that one test is then reported as skipped).
chromium:
	.ci/install-chromium

test: $(STAMP) chromium
	$(BIN)/python -m pytest -n 2 --timeout 600 tests

bench: $(STAMP)
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis ./*__mypyc.*.so
	find $(PACKAGES) -name '*.so' -delete
