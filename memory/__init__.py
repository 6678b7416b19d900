"""The memory domain, in layers: each imports only those below it (``make lint`` checks).

* ``actions/``   workflows that span models: the turn and its tools (``turn``, ``tools``,
  ``mcp``), what a reply's request carried and its turn changed (``memory_trace``),
  context assembly (``context``) and the passages recalled into it (``recalled``),
  curation, summaries and titles that settle (``summarize``, ``titles``), a new topic and
  the silent fork (``topics``, ``fork``), evaluation and its scheduling (``evaluation``,
  ``scheduling``), the interfaces' writes (``facts``, ``sessions``, ``preferences``), the
  servers' start and drain (``serving``), deletion, export and import (``portability``),
  and consolidation (``consolidation/``: a package; outsiders import only its
  ``__init__``).
* ``stores/``    reading and writing one kind of record: messages, facts, notes,
  persistent memory, memory states and their sources, leases (the session lock), stops,
  search, recall (``recall/``: the agent's search of its past chats, ranked), and
  consolidation's entries of a scope.
* ``events.py``  every websocket event and the message and topic payloads, defined once.
* ``models/``    rows, their behaviour and their QuerySets, a module by meaning (tenancy,
  conversation, facts, audit, leases, consolidation, endpoints, preferences), with
  Django's own files: ``admin/`` (with ``scope.py``: staff confined to their
  organizations), ``apps.py``, ``tasks.py``, ``management/``, ``migrations/``.
* ``drift/``     drift detection without the ORM: detectors, cues, and the model's detector.
* ``llm/``       the one seam to a model: the OpenAI-compatible client, the endpoints an
  operator declares and their probe, the offline model and its gist, ``make run``'s local
  model, the model's profile and the turn's shape it implies (``profiles``, ``shape``),
  the stream pump the turn reads a model through.
* ``text/``      people's words without the ORM: text statistics (drift, recall and
  consolidation), sentence embeddings (``embeddings``: one seam), whether a message asks
  for a memory action (``intent``), the user's memory commands, Markdown as sanitized HTML.
* ``infra/``     the services the domain runs on: the Redis outage breakers.
* ``lib/``       small pure helpers every layer needs: the specification's constants
  (``spec``), limits, tokens, text, validation, refusals and their texts (``errors``), the
  built-in tools' names and words, fact keys, reply deltas.

Nothing here imports the interfaces (``chat/``) or the project package (``driftless/``).
"""
