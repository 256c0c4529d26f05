PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: run test lint bench

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

lint: $(PY)
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

# Parley against its references (Direct upstream, a naive Channels consumer), measured in the
# same run on loopback; prints the table the README shows. ARGS="--quick" for a smoke run.
bench: $(PY)
	$(PIP) install --quiet -e ".[dev]"
	$(PY) -m bench $(ARGS)
