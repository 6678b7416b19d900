"""Leases: locks that expire on their own, kept in the database (memory/stores/leases.py)."""

from __future__ import annotations

from django.db import models


class Lease(models.Model):
    """A lock that expires on its own: held by one process while it renews it
    (memory/stores/leases.py). The database is its only copy, so it survives a cache outage and
    frees itself within ``LEASE_SECONDS`` of its holder dying."""

    name = models.CharField(max_length=100, primary_key=True)
    holder = models.CharField(max_length=64)
    acquired_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} until {self.expires_at:%H:%M:%S}"
