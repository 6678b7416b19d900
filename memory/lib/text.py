"""Text rules written once: how text is shortened, and what an untitled thing is called.

Characters are Unicode code points; whitespace is whatever ``str.split`` splits on.
"""

from __future__ import annotations

from typing import Literal

UNTITLED_TOPIC = "Untitled topic"
UNTITLED_SESSION = "New conversation"
# How persistent memory and the earlier-topics block mark a reversed decision.
DEPRECATED_PREFIX = "[DEPRECATED] "
ELLIPSIS = "…"


def one_line(text: str, limit: int | None = None, *, at_word: bool = False) -> str:
    """``text`` on one line (runs of whitespace become one space), at most ``limit``
    characters, a cut marked with an ellipsis; ``at_word`` cuts at the last word boundary
    (when one falls in the second half)."""
    text = " ".join(text.split())
    if limit is None or len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if at_word:
        if " " in cut[limit // 2 :]:
            cut = cut[: cut.rindex(" ")]
        cut = cut.rstrip(" ,;:.-")
    return cut + ELLIPSIS


def shorten(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters, its lines kept: cut after the last sentence
    (or else word) that ends in the second half of the room, the cut marked with an
    ellipsis. For what people read (a summary the model ran long on)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    ends = [cut.rfind(mark) + len(mark) for mark in (". ", "! ", "? ", "。", "\n")]
    end = max(ends)
    if end < limit // 2:
        end = cut.rfind(" ") if cut.rfind(" ") >= limit // 2 else len(cut)
    return cut[:end].rstrip() + ELLIPSIS


def clip(text: str, limit: int, *, keep: Literal["head", "tail"] = "head") -> str:
    """``text`` cut to about ``limit`` characters, saying how much was cut (for what a
    model reads: it learns that something is missing)."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    if keep == "tail":
        return f"[{ELLIPSIS} {cut} earlier characters cut] " + text[-limit:]
    return text[:limit] + f" [{ELLIPSIS} {cut} characters cut]"


def shown_topic_title(title: str) -> str:
    """A topic's title as people and the model read it: on one line, or the untitled word."""
    return one_line(title) or UNTITLED_TOPIC


# Stored text (summaries, notes, facts, titles) is quoted where it enters a prompt, so that
# no line of it can start a line of the prompt (a forged ``## `` section, a forged record):
# a record's first line follows its label on the same line, and every later line, like
# every line of a quoted block, begins with the quote mark. ``str.splitlines`` splits on
# every line break Unicode knows (``\r``, ``\v``, ``\f``, U+2028...), not only ``\n``.
QUOTE_MARK = "> "
RECORD_CONTINUATION = "  " + QUOTE_MARK


def record_text(text: str) -> str:
    """Stored text as the body of a one-line record: its first line where the record's
    label puts it, each later line behind ``RECORD_CONTINUATION``."""
    first, *rest = text.strip().splitlines() or [""]
    return "\n".join([first, *(f"{RECORD_CONTINUATION}{line}".rstrip() for line in rest)])


def quoted_block(text: str) -> str:
    """Stored text as a quoted block: every line behind ``QUOTE_MARK``."""
    lines = text.strip().splitlines()
    return "\n".join(f"{QUOTE_MARK}{line}".rstrip() for line in lines)


def section(title: str, body: str) -> str:
    """A section of the prompt: a ``##`` heading and its body; nothing when the body is
    empty. Only the assembler opens sections: stored text is quoted inside them."""
    return f"## {title}\n{body}" if body else ""
