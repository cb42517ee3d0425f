# Two entry points on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The modules setup.py compiles (mypyc, C helpers): editing one rebuilds the extensions, so a
# stale compiled copy never shadows the source.
COMPILED := $(shell grep -o '"[a-z_/0-9]*\.\(py\|c\)"' setup.py | tr -d '"')
PACKAGES := replica message_routing state_manager xnet consensus_stub examples
# The IC's JavaScript agent, pinned by package-lock.json, for the interoperability tests.
JS_CLIENTS := tests/ic_clients/js
JS_STAMP   := $(JS_CLIENTS)/node_modules/.installed

.PHONY: demo test setup clean bench chromium ic-clients

$(STAMP): pyproject.toml setup.py $(COMPILED)
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	find $(PACKAGES) -name '*.so' -delete
	rm -f ./*__mypyc.*.so  # mypyc's shared library of several modules lives at the top
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# Without node and npm the install is not possible here: say so, and leave the tests that need
# the JavaScript agent to fail with the same instructions (tests/ic_clients/node.py).
$(JS_STAMP): $(JS_CLIENTS)/package.json $(JS_CLIENTS)/package-lock.json
	@if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then \
		cd $(JS_CLIENTS) && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed; \
	else \
		echo "make: node and npm are not installed: the IC client interoperability tests (tests/interop) will FAIL;" \
			"install Node.js 20 or later with npm and run make setup again" >&2; \
	fi

ic-clients: $(JS_STAMP)

setup: $(STAMP) $(JS_STAMP)

demo: $(STAMP)
	$(BIN)/replica demo

# Headless Chromium for the status page's browser test, where it can be installed (the script
# says how to get it where it cannot, and that one test is then reported as skipped).
chromium:
	.ci/install-chromium

test: $(STAMP) $(JS_STAMP) chromium
	$(BIN)/python -m pytest -n 2 --timeout 600 tests

bench: $(STAMP)
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis ./*__mypyc.*.so $(JS_CLIENTS)/node_modules
	find $(PACKAGES) -name '*.so' -delete
