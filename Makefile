# The verbs a newcomer looks for. `make run` needs nothing but Python 3.11.
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test worker lint bench

$(VENV)/.installed: requirements.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

install: $(VENV)/.installed

run: export DEBUG ?= true
run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_demo
	$(PY) -m driftless.serve -b $(HOST) -p $(PORT) driftless.asgi:application

test: install
	$(PY) -m pytest

# The worker runs the periodic sweep too (--beat), and is started again if it dies
# (driftless/supervise.py: Celery can still die when Redis restarts).
worker: install
	$(PY) -m driftless.supervise -- $(PY) -m celery -A driftless worker --beat --loglevel=info

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The public dialogue sets live outside the repository: `make bench DRIFT_DATA=<dir>`.
DRIFT_DATA ?=

bench: install
	$(PY) bench/chat_load.py
	$(PY) bench/context_assembly.py
	$(PY) bench/soak.py
	$(PY) bench/summary_cost.py
	@for data in $(if $(DRIFT_DATA),$(DRIFT_DATA)/tiage-dev.jsonl \
		$(DRIFT_DATA)/superdialseg-validation.jsonl) \
		bench/data/product-tune.jsonl bench/data/product-test.jsonl; do for interval in 1 10; do \
		$(PY) bench/drift_quality.py --data $$data --interval $$interval || exit 1; \
	done; done
	$(PY) bench/drift_quality.py --data bench/data/product-test.jsonl --replies offline
