"""Issue 43's targets for ``python -m bench.chat_load``: a returning user's long-reply turn,
one process, batched; and two processes against one."""

from __future__ import annotations

CPU_MS_TARGET = 30.0
SQL_TARGET = 15.0
REDIS_TARGET = 15.0
SCALE_TARGET = 1.5


def missed_targets(result: dict) -> list[str]:
    """The targets a run missed (a row that did not run is not judged)."""
    checks = (
        (
            "CPU ms per long-reply turn, returning users",
            result["cpu_ms_per_turn"]["batched"]["long_returning"],
            CPU_MS_TARGET,
            max,
        ),
        (
            "SQL statements per turn, returning users",
            result["sql_per_turn"]["long_returning"],
            SQL_TARGET,
            max,
        ),
        (
            "Redis commands per turn, returning users",
            result["redis_per_turn"]["long_returning"],
            REDIS_TARGET,
            max,
        ),
        ("two processes against one", result["scale_2_vs_1"], SCALE_TARGET, min),
    )
    missed = []
    for name, value, target, bound in checks:
        if value is None:
            continue
        if (bound is max and value > target) or (bound is min and value < target):
            limit = "at most" if bound is max else "at least"
            missed.append(f"{name} {value} ({limit} {target:g})")
    return missed
