"""Chat load (``python -m bench.chat_load``): websocket clients against real server
processes, CPU per turn; ``environment`` is where a run keeps its state, ``settings`` the
servers' settings."""
