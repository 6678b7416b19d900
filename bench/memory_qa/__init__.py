"""Memory QA: does the agent remember, in a new session, what was said before?

``python -m bench.memory_qa`` asks the model (``__main__``); ``bench.memory_qa.reach``
counts, with no model, whether the answer reaches the prompt; ``bench.memory_qa.consolidation``
compares consolidation off and on. ``harness`` replays the histories, ``data`` reads and
scores them.
"""
