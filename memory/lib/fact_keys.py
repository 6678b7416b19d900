"""What a durable fact's key may be, and when two keys are the same key.

A key names a fact on every turn of every session of a scope (the stable prefix prints
``key: value``), so it must say what it looks like it says:

* **one line, visible characters**: no control character (a newline could forge a
  section of the prompt), no format or invisible character (zero-width space, bidi
  controls, joiners, variation selectors, fillers), nothing unassigned or private;
* **normalized**: NFKC (full-width, ligature and mathematical-bold spellings are the plain
  key), surrounding blanks trimmed, runs of spaces one space;
* **unique by its look**: two keys whose Unicode TR39 skeletons are equal (``editor`` and
  ``editоr`` with a Cyrillic o) are the same key to a reader, so a new key that only looks
  like an existing one is refused, naming the existing key. The confusable data is the
  Unicode consortium's ``confusables.txt`` as the well-kept ``confusable_homoglyphs``
  package ships it (both directions of each mapping); :func:`skeleton` folds each
  character to one representative of its class of look-alikes.

Keys stored before these rules keep working: :func:`loose_key` folds a stored key the
same way without refusing anything, so such a key is still found, changed and removed.
"""

from __future__ import annotations

import functools
import unicodedata

from confusable_homoglyphs.confusables import confusables_data

# Categories a key may not hold: controls (Cc: newline, tab, ...), format (Cf: zero-width
# space and joiners, bidi controls, soft hyphen, BOM), surrogates, private use, unassigned,
# and the line and paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# Default-ignorable characters of other categories: drawn as nothing.
_INVISIBLE = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, 0x2800]
    + list(range(0x180B, 0x1810))
    + list(range(0xFE00, 0xFE10))
    + list(range(0xE0100, 0xE01F0))
)
# The library wraps right-to-left glyphs in left-to-right marks for display.
_DISPLAY_MARKS = "\u200e\u200f"


def refused_character(key: str) -> str | None:
    """The first character a key may not hold, named (``U+200B ZERO WIDTH SPACE``), or None."""
    for char in key:
        if unicodedata.category(char) in _REFUSED_CATEGORIES or ord(char) in _INVISIBLE:
            return describe_character(char)
    return None


def describe_character(char: str) -> str:
    return f"U+{ord(char):04X} {unicodedata.name(char, 'UNNAMED CHARACTER')}"


def loose_key(key: str) -> str:
    """The key normalized (NFKC, trimmed, spaces collapsed), refusing nothing."""
    return " ".join(unicodedata.normalize("NFKC", key).split())


def skeleton(key: str) -> str:
    """The TR39 skeleton of a key: equal for keys that differ only by look-alikes."""
    folded = "".join(_representatives().get(char, char) for char in _visible(key))
    return unicodedata.normalize("NFD", folded)


def lookalike_difference(first: str, second: str) -> str:
    """The characters of ``second`` that ``first`` does not hold, named, for a refusal."""
    odd = [describe_character(char) for char in dict.fromkeys(second) if char not in first]
    return ", ".join(odd[:3])


def _visible(key: str) -> str:
    key = unicodedata.normalize("NFD", loose_key(key))
    return "".join(char for char in key if refused_character(char) is None)


@functools.cache
def _representatives() -> dict[str, str]:
    """Each confusable character's representative: the classes are joined from the pairs
    of ``confusables.txt`` (a source and its prototype); a class's representative is its
    prototype when that is a sequence (``m`` reads ``rn``), else its ASCII member, else
    its lowest code point. Built once, in about 50 ms."""
    parent: dict[str, str] = {}

    def find(item: str) -> str:
        parent.setdefault(item, item)
        while parent[item] != item:
            parent[item] = parent[parent[item]]
            item = parent[item]
        return item

    for char, glyphs in confusables_data.items():
        for glyph in glyphs:
            other = glyph["c"].strip(_DISPLAY_MARKS)
            if other:
                parent[find(char.strip(_DISPLAY_MARKS) or char)] = find(other)
    classes: dict[str, list[str]] = {}
    for item in list(parent):
        classes.setdefault(find(item), []).append(item)
    representatives: dict[str, str] = {}
    for members in classes.values():
        best = min(members, key=_preference)
        for member in members:
            if len(member) == 1 and member != best:
                representatives[member] = best
    return representatives


def _preference(item: str) -> tuple[int, int, str]:
    return (len(item) == 1, not item.isascii(), item)
