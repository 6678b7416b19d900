"""Markdown rendering benchmark: the worst text at the largest size any path accepts.

Usage (from the repository root)::

    python -m bench.markdown [--fuzz 200] [--repeat 3]

Every text the page shows goes through memory/text/markdown.py. The largest any path
accepts is an imported assistant reply (2 × MAX_MESSAGE_CHARS = 32,000 characters). The
bench renders, at that size, the shapes known to be expensive (task lists, nested lists,
tables, emphasis runs, brackets, links, quotes, code) and ``--fuzz`` random mixes of
Markdown pieces (seeded), each the best of ``--repeat`` runs of CPU time (the machine is
shared: wall time measures the neighbours). As a baseline in the same run it renders the
task list with mdit-py-plugins' task-list rule and no budget (the renderer before the fix)
at a quarter of the size. It prints a table and a last JSON line::

    {"bench": "markdown", "chars": 32000, "worst_ms": W, "worst_case": "...", "target_ms": 50,
     "baseline_task_list_8000_ms": B}

and exits 1 when the worst render takes 50 ms or more.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from markdown_it import MarkdownIt
from mdit_py_plugins.tasklists import tasklists_plugin

from memory.lib.limits import MAX_MESSAGE_CHARS
from memory.text.markdown import markdown_head, render_markdown

TARGET_MS = 50.0
SHAPES = {
    "task list": "- [ ] a\n",
    "nested task list": "- [ ] a\n  - [x] b\n",
    "list": "- a\n",
    "ordered list": "1. a\n",
    "list stairs": "- a\n  ",
    "table": "|a|b|\n",
    "emphasis run": "*a_",
    "strong run": "**a ",
    "strikethrough": "~~a ",
    "brackets": "[",
    "open links": "[a](",
    "links": "[a](http://b.example) ",
    "bare links": "http://a.example/ ",
    "quotes": "> a\n",
    "code spans": "`a",
    "headings": "# a\n",
    "entities": "&amp;",
    "escapes": "\\*",
    "code fence": "```python\nfor x in y: print(x)\n",
    "prose": "The quick brown fox, it said; jumps over the lazy dog. ",
    "lines": "a\n",
}
PIECES = [
    "*", "**", "_", "`", "```", "~~", "> ", "- ", "1. ", "# ", "|", "---", "\n", "\n\n", "[",
    "]", "(", ")", "<", ">", "&", "https://x.example/", "- [ ] ", "- [x] ", "\\", "  ", "a",
    "word ", "生菜", "|a|b|\n|-|-|\n",
]  # fmt: skip


def cpu_ms(render, text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        render_markdown.cache_clear()
        start = time.process_time()
        render(text)
        best = min(best, time.process_time() - start)
    return best * 1000


def fill(unit: str, size: int) -> str:
    body = (unit * (size // len(unit) + 1))[:size]
    return "|a|b|\n|-|-|\n" + body[: size - 12] if unit == "|a|b|\n" else body


def baseline(text: str) -> None:
    parser = MarkdownIt("commonmark", {"html": False, "linkify": True, "breaks": True})
    parser.enable(["table", "strikethrough", "linkify"]).use(tasklists_plugin)
    parser.render(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fuzz", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    size = 2 * MAX_MESSAGE_CHARS  # an imported reply (memory/actions/portability.py)
    rows = [(name, fill(unit, size)) for name, unit in SHAPES.items()]
    rng = random.Random(45)
    for number in range(args.fuzz):
        pieces = []
        while sum(map(len, pieces)) < size:
            pieces.append(rng.choice(PIECES))
        rows.append((f"fuzz {number}", "".join(pieces)[:size]))
    render_markdown("```python\nx = 1\n```\n- [ ] *a* http://x.example | b |")  # warm up
    results = [
        (name, markdown_head(text), cpu_ms(render_markdown, text, args.repeat))
        for name, text in rows
    ]
    base = cpu_ms(baseline, fill(SHAPES["task list"], size // 4), 1)
    print(f"{'text (' + str(size) + ' chars)':<24} {'as Markdown':>12} {'cpu ms':>8}")
    for name, head, ms in sorted(results, key=lambda row: -row[2])[:25]:
        print(f"{name:<24} {head:>12} {ms:>8.1f}")
    print(f"{'baseline: plugin, 8k':<24} {size // 4:>12} {base:>8.1f}")
    worst = max(results, key=lambda row: row[2])
    print(
        json.dumps(
            {
                "bench": "markdown",
                "chars": size,
                "worst_ms": round(worst[2], 1),
                "worst_case": worst[0],
                "target_ms": TARGET_MS,
                f"baseline_task_list_{size // 4}_ms": round(base, 1),
            }
        )
    )
    return 0 if worst[2] < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
