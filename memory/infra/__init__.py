"""The services the domain runs on, and what it does while one is down.

* ``outage.py``  Redis is a speed-up, never the only copy: the breakers of the channel
  layer and the broker.
"""
