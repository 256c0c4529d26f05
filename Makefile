PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# llama.cpp (the embedded model) is compiled for AVX2 rather than for the exact CPU: on CPUs with
# AMX, the -march=native build uses AMX tiles, which fault where the kernel doesn't grant them to
# the process (virtual machines, sandboxes). The multimodal library (llava/mtmd) is left out: a
# text model never loads it, and it is a third of the build. Set CMAKE_ARGS to build differently.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DLLAVA_BUILD=OFF

.PHONY: run test test-fast lint bench

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

run: $(PY)
	$(PIP) install --quiet -e ".[local]"
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py ensure_admin
	$(PY) manage.py serve

test: $(PY)
	$(PIP) install --quiet -e ".[dev,local]"
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) manage.py makemigrations --check --dry-run --verbosity 0
	$(PY) -m pytest

# The tests that need no browser, embedded model or server process of their own (markers in
# pyproject.toml, given by tests/conftest.py): what to run while working. docs/testing.md.
test-fast: $(PY)
	$(PIP) install --quiet -e ".[dev,local]"
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m pytest -m "not browser and not model and not services"

lint: $(PY)
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

# Parley against its references (Direct upstream, a naive Channels consumer), measured in the
# same run on loopback; prints the table docs/performance.md shows. ARGS="--quick": a smoke run.
bench: $(PY)
	$(PIP) install --quiet -e ".[dev]"
	$(PY) -m bench $(ARGS)
