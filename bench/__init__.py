"""The benchmarks, each run from the repository root as ``python -m bench.NAME``.

Families are packages (``python -m bench.memory_qa``, ``bench.memory_qa.reach``,
``bench.memory_qa.consolidation``; ``bench.real_model``; ``bench.consolidation``,
``bench.consolidation.similarity``); the others are modules (``bench.chat_load``,
``bench.prompt_cache``, ``bench.context_assembly``, ``bench.search``, ``bench.soak``,
``bench.summary_cost``, ``bench.drift_quality``). Every bench that needs Django sets it up
through :mod:`bench.common`. ``bench/data/`` holds their data files. The bench imports
the domain (``memory``), the interfaces (``chat``) and the tests' fakes; nothing imports
the bench (pyproject.toml's import contracts).
"""
