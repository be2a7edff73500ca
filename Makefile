# benchhub: `make help` lists the verbs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
FIXTURES ?= $(HOME)/.cache/benchhub-fixtures
export BENCHHUB_FIXTURES ?= $(FIXTURES)
# What `make test` touches: one PostgreSQL database of its own, named uniquely per run (pytest-django
# creates test_<name> on the server below and drops it at the end), and one Redis DB number.
TEST_POSTGRES ?= postgres://postgres@127.0.0.1:5432
TEST_DATABASE_NAME := benchhub_$(shell date +%s)_$(shell od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
TEST_DATABASE_URL ?= $(TEST_POSTGRES)/$(TEST_DATABASE_NAME)
TEST_REDIS_DB ?= 13
TEST_REDIS_URL ?= redis://127.0.0.1:6379/$(TEST_REDIS_DB)

.DEFAULT_GOAL := help
.PHONY: help install run test lint typecheck fixtures services system-deps reliability bench

help:  ## list the verbs
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The agent's dependencies are installed first, each resolved for this Python, then the agent itself in
# editable mode without touching them (its Requires-Python, >=3.11, is this Python's anyway).
# PYTHONWARNINGS: the build backend's warnings about editable installs are for package authors; they
# buried make run's output.
$(VENV)/.installed: $(BIN)/python pyproject.toml agent/pyproject.toml protocol/pyproject.toml
	pkg-config --exists icu-uc 2>/dev/null || scripts/system-deps.sh  # PyICU builds against the system's ICU
	$(BIN)/pip install --quiet --upgrade pip
	PYTHONWARNINGS=ignore $(BIN)/pip install --quiet -e ./protocol -e '.[dev]'
	$(BIN)/python -c 'import tomllib; print("\n".join(tomllib.load(open("agent/pyproject.toml", "rb"))["project"]["dependencies"]))' \
		| PYTHONWARNINGS=ignore xargs -d '\n' $(BIN)/pip install --quiet
	PYTHONWARNINGS=ignore $(BIN)/pip install --quiet --no-deps --ignore-requires-python -e ./agent
	touch $@

install: $(VENV)/.installed  ## create .venv and install the service, the agent and the dev tools

PORT ?= 8000
# The development default: DEBUG on, with the public embedded key. Logs below WARNING (each in-process
# task, the file watcher) stay out of the way: the last line printed is the URL to open.
run: export DJANGO_DEBUG := 1
run: export DJANGO_LOG_LEVEL ?= WARNING
run: install  ## start the site on the embedded default (SQLite, in-process tasks) with demo data, on :8000 (PORT=8001 for another)
	@$(BIN)/python manage.py prepare_site --demo
	@$(BIN)/python manage.py serve --skip-checks 127.0.0.1:$(PORT)

fixtures: install  ## fetch llama.cpp at the pinned commit and the Gemma 3 270M model into $(FIXTURES)
	PYTHON=$(BIN)/python scripts/fixtures.sh

services:  ## start PostgreSQL and Redis on this machine if they are not running
	scripts/services.sh

system-deps:  ## install the Debian packages the tests need (cmake, compilers, clang, chromium)
	scripts/system-deps.sh

lint: export DJANGO_DEBUG := 1
lint: install  ## ruff and the migrations check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python manage.py makemigrations --check --dry-run

# django-stubs imports the settings, which refuse to start without a secret key unless DEBUG is asked for.
typecheck: export DJANGO_DEBUG := 1
typecheck: install  ## mypy over the service and the agent
	$(BIN)/mypy benchhub agent/benchhub_agent protocol/benchhub_protocol
	$(BIN)/mypy --cache-dir .mypy_cache/bench bench  # its own cache: a shared one resolves benchhub_agent differently

test: install system-deps services fixtures lint typecheck  ## the whole test suite on PostgreSQL and Redis (what CI runs)
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/pytest

reliability: install services  ## the slow fault and load tests of issue 7 (worker kills, Redis/PostgreSQL outages, 30 min of sustained load; ~45 min)
	BENCHHUB_LOAD_MINUTES=$${BENCHHUB_LOAD_MINUTES:-30} DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) \
		$(BIN)/pytest tests/reliability -m slow -s

bench: install services  ## the performance guard of issue 23 (bh_perf_after_* databases, Redis db 9; ~50 min the first time on 2 shared cores, ~25 after); figures in docs/performance.md
	$(BIN)/python -m bench all --size $${BENCH_SIZE:-100000}
