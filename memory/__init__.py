"""The memory domain, in layers: each imports only those below it (``make lint`` checks).

* ``actions/``   workflows that span models: the turn and its tools (``turn``, ``tools``,
  ``mcp``), context assembly (``context``), curation, summaries, a new topic and the
  silent fork (``topics``, ``fork``), evaluation and its scheduling (``evaluation``,
  ``scheduling``), deletion, export and import (``portability``).
* ``stores/``    reading and writing one kind of record: messages, facts, notes,
  persistent memory, memory states, leases (the session lock), search.
* ``events.py``  every websocket event and the message and topic payloads, defined once.
* ``models/``    rows, their behaviour and their QuerySets (with Django's own files:
  ``admin/`` (with ``scope.py``: staff confined to their organizations),
  ``apps.py``, ``tasks.py``, ``management/``, ``migrations/``).
* ``drift/``     drift detection without the ORM: detectors, cues, text statistics, and
  the model's detector.
* ``llm/``       the one seam to a model: the OpenAI-compatible client, the offline model.
* ``lib/``       small pure helpers: limits, constants, tokens, text, validation, errors.

Nothing here imports the interfaces (``chat/``) or the project package (``driftless/``).
"""
