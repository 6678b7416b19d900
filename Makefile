# The verbs a newcomer looks for. `make run` needs nothing but Python 3.11.
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run serve test worker lint bench

$(VENV)/.installed: requirements.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

install: $(VENV)/.installed

run: export DEBUG ?= true
run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_demo
	$(PY) manage.py runserver $(HOST):$(PORT)

# Several ASGI worker processes behind one port (uvicorn's supervisor): the full setup
# only, since the processes share their state through PostgreSQL and Redis.
WORKERS ?= 2
serve: install
	@test -n "$$DATABASE_URL" -a -n "$$REDIS_URL" || { \
		echo "make serve runs $(WORKERS) processes that share PostgreSQL and Redis:" \
			"set DATABASE_URL and REDIS_URL (or use make run)"; exit 2; }
	$(PY) manage.py migrate --noinput
	$(VENV)/bin/uvicorn driftless.asgi:application --host $(HOST) --port $(PORT) \
		--workers $(WORKERS) --ws websockets-sansio --lifespan off

test: install
	$(PY) -m pytest

worker: install
	$(PY) -m celery -A driftless worker --loglevel=info

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The public dialogue sets live outside the repository: `make bench DRIFT_DATA=<dir>`.
DRIFT_DATA ?=

bench: install
	$(PY) bench/chat_load.py
	$(PY) bench/prompt_cache.py
	$(PY) bench/context_assembly.py
	$(PY) bench/summary_cost.py
	@for data in $(if $(DRIFT_DATA),$(DRIFT_DATA)/tiage-dev.jsonl \
		$(DRIFT_DATA)/superdialseg-validation.jsonl) \
		bench/data/product-tune.jsonl bench/data/product-test.jsonl; do for interval in 1 10; do \
		$(PY) bench/drift_quality.py --data $$data --interval $$interval || exit 1; \
	done; done
	$(PY) bench/drift_quality.py --data bench/data/product-test.jsonl --replies offline
