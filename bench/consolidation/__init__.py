"""Consolidation: a scope grown over 100 sessions, with and without it
(``python -m bench.consolidation``), and the subject similarity its thresholds rest on
(``python -m bench.consolidation.similarity``)."""
