"""How long a stopping server process lets the turns in flight finish before it marks them
interrupted: ``make run``'s (driftless/serve.py) and ``make serve``'s
(driftless/multiserve.py). Alone here so that neither server imports the other's."""

DRAIN_SECONDS = 8.0
