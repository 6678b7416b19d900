"""The benchmarks, each run from the repository root as ``python -m bench.NAME``.

Families are packages (``python -m bench.memory_qa``, ``bench.memory_qa.reach``,
``bench.memory_qa.consolidation``; ``bench.real_model``; ``bench.consolidation``,
``bench.consolidation.similarity``), and so is ``bench.chat_load`` (with its servers'
settings module); the others are modules (``bench.prompt_cache``,
``bench.context_assembly``, ``bench.search``, ``bench.soak``, ``bench.summary_cost``,
``bench.drift_quality``). Every bench that needs Django sets it up through
:func:`bench.common.setup_django`. ``bench/data/`` holds their data files. The bench
imports the domain (``memory``), the interfaces and the tests' fakes; nothing of
``memory``, ``chat`` or ``driftless`` imports it (pyproject.toml's import contracts).
"""
