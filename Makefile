# asyncq developer tasks.  Every target is idempotent.
#
#   make venv        create .venv and install asyncq[dev] (editable); redone when pyproject.toml changes
#   make redis-bin   make sure redis-server is installed (apt-get as root, else explain)
#   make browser-bin make sure Debian's chromium is installed for the dashboard's browser tests
#   make prometheus-bin make sure Debian's prometheus (prometheus + promtool) is installed
#   make check-rules promtool checks the shipped alert rules (asyncq/metrics/alerts.yml) and
#                    runs their unit tests (tests/metrics/alerts_test.yml)
#   make test-prometheus a real Prometheus scrapes a worker and the exporter and evaluates
#                    the shipped rules (the slow tests of tests/metrics)
#   make redis-up    start a local redis-server on 127.0.0.1:$(REDIS_PORT) (AOF on), state in .run/
#   make redis-down  stop the server started by redis-up
#   make test        run the test suite in parallel (pytest-xdist, TEST_WORKERS=auto; tests
#                    start their own redis-server per process, or use ASYNCQ_TEST_REDIS_URL if
#                    set, then serially); no fault injection: that is make test-chaos
#   make test-chaos  the whole fault-injection suite (tests/chaos), serially, slow cases included
#   make test-interop  the Go asynq interop suite with its slow cases (needs Go: builds the programs)
#                    (the 1M-task soak); ASYNCQ_CHAOS_REPORT=file.jsonl collects the ledgers
#   make test-django the Django tests with their slow cases on Django 5.2 (django-tasks, Python
#                    3.11) and on Django 6 (a .venv-django6-py3.x per Python >= 3.12 found)
#   make lint        ruff + mypy
#   make docs        install the docs toolchain (the `docs` extra) and build the site from docs/
#                    into .run/site/ (MkDocs, strict: a warning or a broken link fails it);
#                    its tests (tests/docs: snippets run, tutorial, offline, nav) are in `make test`
#   make run         start redis and run the quickstart demo
#   make bench       run the benchmark suite against the peers (ARGS=--quick for a smoke run;
#                    see benchmarks/README.md)
#   make ab A=<ref> [B=<ref>]  the A/B guard: asyncq at commit A against commit B (default
#                    HEAD), each installed in its own venv, the hot scenarios interleaved for
#                    8 rounds (~10 min on 2 cores; ARGS=--quick: 2 rounds, ~2 min); prints B/A
#                    and saves benchmarks/results/ab-*.json. Cite it against the merge base for
#                    every change to a per-task path (benchmarks/README.md, "A/B guard")
#   make clean       remove build artefacts, caches and .run/ (stops redis first)
#   make distclean   clean + remove .venv

PYTHON     ?= python3
REDIS_PORT ?= 6390
VENV       := .venv
STAMP      := $(VENV)/.stamp
RUN_DIR    := $(CURDIR)/.run
REDIS_DIR  := $(RUN_DIR)/redis-$(REDIS_PORT)
REDIS_PID  := $(RUN_DIR)/redis-$(REDIS_PORT).pid
REDIS_LOG  := $(RUN_DIR)/redis-$(REDIS_PORT).log
PYTEST_ARGS ?=
ARGS       ?=
# The docs toolchain (the `docs` extra) goes into the same venv, redone when pyproject changes.
DOCS_STAMP := $(VENV)/.stamp-docs
DOCS_SITE  := $(RUN_DIR)/site

LINT_PATHS := $(wildcard asyncq tests examples benchmarks)

# The test suite needs a redis-server binary unless it is pointed at a server.
TEST_REDIS_DEP := $(if $(ASYNCQ_TEST_REDIS_URL),,redis-bin)
# pytest-xdist processes for `make test`, each with its own redis-server (0: serial). Serial
# against a server of yours: some tests empty it (FLUSHDB), which would hit the other processes.
TEST_WORKERS ?= $(if $(ASYNCQ_TEST_REDIS_URL),0,auto)

.PHONY: venv docs redis-bin browser-bin prometheus-bin check-rules test-prometheus redis-up redis-down test test-chaos test-django test-interop lint run bench ab clean distclean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

redis-bin:
	@if command -v redis-server >/dev/null 2>&1; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "redis-server not found: installing it with apt-get"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server; \
	else \
		echo "redis-server not found: install it (Debian/Ubuntu: apt-get install redis-server) or set ASYNCQ_TEST_REDIS_URL" >&2; \
		exit 1; \
	fi

# The dashboard's browser tests drive the system chromium (never a downloaded browser).
browser-bin:
	@if [ -x /usr/bin/chromium ]; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "chromium not found: installing it with apt-get"; \
		(apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium) || exit 1; \
	else \
		echo "chromium not found: install it (Debian/Ubuntu: apt-get install chromium) for the web dashboard's browser tests" >&2; \
		exit 1; \
	fi

# The alert rules are checked, and evaluated by the slow tests, with Debian's prometheus
# package (never a downloaded binary).
prometheus-bin:
	@if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "prometheus/promtool not found: installing Debian's prometheus with apt-get"; \
		(apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
			--no-install-recommends prometheus) || exit 1; \
	else \
		echo "prometheus/promtool not found: install them (Debian/Ubuntu: apt-get install prometheus) to check the alert rules" >&2; \
		exit 1; \
	fi

check-rules: prometheus-bin
	promtool check rules asyncq/metrics/alerts.yml
	promtool test rules tests/metrics/alerts_test.yml

redis-up: redis-bin
	@if redis-cli -h 127.0.0.1 -p $(REDIS_PORT) ping 2>/dev/null | grep -q PONG; then \
		echo "redis already answering on 127.0.0.1:$(REDIS_PORT)"; \
		exit 0; \
	fi; \
	mkdir -p "$(REDIS_DIR)"; \
	redis-server --bind 127.0.0.1 --port $(REDIS_PORT) --protected-mode yes \
		--daemonize yes --pidfile "$(REDIS_PID)" --logfile "$(REDIS_LOG)" \
		--dir "$(REDIS_DIR)" --appendonly yes --appendfsync everysec || exit 1; \
	i=0; \
	until redis-cli -h 127.0.0.1 -p $(REDIS_PORT) ping 2>/dev/null | grep -q PONG; do \
		i=$$((i + 1)); \
		if [ $$i -ge 100 ]; then \
			echo "redis-server did not answer on 127.0.0.1:$(REDIS_PORT); log tail:" >&2; \
			tail -n 20 "$(REDIS_LOG)" >&2 || true; \
			exit 1; \
		fi; \
		sleep 0.1; \
	done; \
	echo "redis up on redis://127.0.0.1:$(REDIS_PORT)/0 (pid $$(cat "$(REDIS_PID)"), log $(REDIS_LOG))"

redis-down:
	@if [ ! -f "$(REDIS_PID)" ]; then \
		echo "no redis started by make on port $(REDIS_PORT)"; \
		exit 0; \
	fi; \
	pid=$$(cat "$(REDIS_PID)"); \
	if kill -0 "$$pid" 2>/dev/null; then \
		kill -TERM "$$pid"; \
		i=0; \
		while kill -0 "$$pid" 2>/dev/null; do \
			i=$$((i + 1)); \
			if [ $$i -ge 100 ]; then \
				echo "redis (pid $$pid) did not stop after 10 s; sending SIGKILL" >&2; \
				kill -KILL "$$pid" 2>/dev/null || true; \
				break; \
			fi; \
			sleep 0.1; \
		done; \
		echo "redis on port $(REDIS_PORT) stopped"; \
	else \
		echo "stale pidfile for port $(REDIS_PORT) removed"; \
	fi; \
	rm -f "$(REDIS_PID)"

test: venv $(TEST_REDIS_DEP) browser-bin
	$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

test-chaos: venv redis-bin
	$(VENV)/bin/python -m pytest -m chaos --run-chaos --run-slow tests/chaos $(PYTEST_ARGS)

test-django: venv redis-bin
	bash tests/contrib/django/matrix.sh $(PYTEST_ARGS)

test-interop: venv redis-bin interop-bin
	$(VENV)/bin/python -m pytest -m interop --run-slow tests/interop $(PYTEST_ARGS)

test-prometheus: venv redis-bin prometheus-bin
	$(VENV)/bin/python -m pytest -m slow --run-slow tests/metrics $(PYTEST_ARGS)

$(DOCS_STAMP): pyproject.toml $(STAMP)
	$(VENV)/bin/python -m pip install --quiet -e '.[dev,docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/python -m mkdocs build --strict --site-dir $(DOCS_SITE)

lint: venv
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/mypy

run: venv redis-bin redis-up
	$(VENV)/bin/python examples/quickstart/run_demo.py --redis-url redis://127.0.0.1:$(REDIS_PORT)/0

bench: venv redis-bin
	$(VENV)/bin/python -m benchmarks $(ARGS)

# The A/B guard: commit A (e.g. the merge base: A=$$(git merge-base main HEAD)) against B.
A ?=
B ?= HEAD
ab: venv redis-bin
	@test -n "$(A)" || { echo "usage: make ab A=<ref> [B=<ref>, default HEAD] [ARGS=--quick]" >&2; exit 2; }
	$(VENV)/bin/python -m benchmarks.ab $(A) $(B) $(ARGS)

clean: redis-down
	rm -rf build dist .run .mypy_cache .ruff_cache .pytest_cache .hypothesis *.egg-info
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)

# The Go programs of the interop tests (tests/interop/go: producer, server, inspector), built
# with Go's module cache against each asynq release tested, into .cache/interop/<version>/;
# tests/interop/conftest.py runs the same script (and so builds them itself when needed).
INTEROP_ASYNQ_VERSIONS ?= v0.26.0 v0.24.1

.PHONY: interop-bin
interop-bin:
	@command -v go >/dev/null 2>&1 || { \
		echo "go not found: interop-bin builds Go programs against github.com/hibiken/asynq; install Go >= 1.24 and put it on PATH" >&2; \
		exit 1; }
	bash tests/interop/go/build.sh $(INTEROP_ASYNQ_VERSIONS)
