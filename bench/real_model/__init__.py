"""A day of use with a real model (``python -m bench.real_model``): ``measures`` holds the
drift and time-to-first-token parts, ``proxy`` the recording pass-through to the model."""
