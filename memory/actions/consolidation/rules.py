"""Consolidation's rules of text: is a merge about one subject, and the model-free pass.

A model's proposal goes through the same checks as the user's input. A ``merge`` says
its entries are about one subject; text statistics check that claim
(:func:`memory.text.stats.subject_similarity`: Unicode words, the language's stop
words, Snowball stems, the cosine of the topic terms of title and summary). Each entry is
compared with the rest of the merge pooled; one that shares too little with them
(similarity below ``SAME_SUBJECT_THRESHOLD``) makes the merge ``unrelated``: it is
refused, and the rest of the proposal still applies. Entries in different scripts
(Japanese beside English) cannot be compared by their words: the model's judgement stands.

The thresholds are measured by ``bench.consolidation.similarity`` on the labelled
subjects of bench/data/consolidation-scope.jsonl, chosen on one half of its subjects and
scored on the other (docs/memory.md gives the numbers):

* ``SAME_SUBJECT_THRESHOLD`` vetoes a model's merge, so it is the threshold that best tells
  one subject from two (the highest true-positive rate less false-positive rate on the
  tune half; of equal ones the lowest, which defers most to the model): in practice,
  entries that share no word of their subject are not merged.
* ``NEAR_DUPLICATE_THRESHOLD`` is for the offline pass, where no model judges first: the
  lowest threshold at which every pair of the tune half it accepts (sharing at least
  ``MIN_SHARED_TERMS`` subject terms) is one subject.

The offline pass (:func:`offline_answer`) is the consolidation a model-free deployment
gets: it proposes merges only (never a supersede: it cannot tell a reversal from a
repetition), of entries nearly duplicating each other, each group into its newest entry,
and never of an entry the user curated or one already deprecated. It answers in the
model's JSON form, so the proposal goes through the same parsing, guards, audit and undo.
The merged summary is the newest entry's, followed by what the older ones add (each of
their sentences with a subject word the newest lacks, behind its day), so nothing durable
is lost. Each group is one newest entry and the older ones nearly duplicating it (no
chains), compared by title and first line (what an earlier merge added is not compared).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from memory.lib.errors import Conflict
from memory.lib.limits import MAX_SUMMARY_CHARS
from memory.text.stats import kept_share, subject_overlap, subject_similarity, topic_terms

if TYPE_CHECKING:  # the rules themselves need no Django (bench.consolidation.similarity)
    from memory.stores.consolidation import ConsolidationEntry

SAME_SUBJECT_THRESHOLD = 0.07
NEAR_DUPLICATE_THRESHOLD = 0.22
# ...and at least this many distinct subject terms shared, for the offline pass and for the
# groups a model is shown: in short entries one shared word ("plan" in "Training plan" and
# "Meal planning", "September" in a marathon and a school) already gives a high cosine.
MIN_SHARED_TERMS = 2
# ...unless the one shared term carries the pair (a cosine this high: "Offsite city: Lisbon"
# and "Offsite moved: Porto", a decision and its reversal, share only their subject).
ONE_TERM_THRESHOLD = 0.24
# A merge's summary keeps what each of its entries said: at least this share of each entry's
# subject terms is in the merged title and summary. The 1.5B model of the local lane often
# writes one entry's summary, or a neighbour's, as the merge's: of its eight merges applied in
# one run of bench.memory_qa.consolidation (2026-12-06), six kept 5 % to 36 % of one
# entry's terms (one of them lost "I chose Lyon"), the other two 58 % or more of each.
KEPT_TERMS_SHARE = 0.5


class ConsolidationConflict(Conflict):
    code = "consolidation_conflict"


class UnusableAnswer(Exception):
    """The model's answer cannot be applied as a whole: nothing changes."""


# A sentence ends at . ! ? (and their CJK forms) followed by a blank, or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")


def entry_text(title: str, summary: str) -> str:
    """What the subject of an entry is read from: its title and summary."""
    return f"{title}\n{summary}"


def unrelated_entry(
    texts: dict[int, str], *, threshold: float = SAME_SUBJECT_THRESHOLD
) -> tuple[int, float] | None:
    """The entry of a merge that shares least with the rest of it, with its similarity,
    when that is below ``threshold``; None when the merge is about one subject (or its
    entries cannot be compared)."""
    weakest: tuple[int, float] | None = None
    for topic_id, text in texts.items():
        rest = "\n".join(other for key, other in texts.items() if key != topic_id)
        similarity = subject_similarity(text, rest)
        if similarity is not None and (weakest is None or similarity < weakest[1]):
            weakest = (topic_id, similarity)
    return weakest if weakest is not None and weakest[1] < threshold else None


def subject_groups(
    texts: Mapping[int, str], *, threshold: float = SAME_SUBJECT_THRESHOLD
) -> list[list[int]]:
    """The entries that may be about one subject, as groups of two or more ids: each
    entry, in the order given, joins the group whose pooled text it shares most with (a
    similarity of at least ``threshold``, the one a merge is checked against, by
    :func:`may_share_subject`), else starts its own. An entry that
    shares its subject with no other is in no group: there is nothing to merge it with or
    supersede it by. Entries that cannot be compared (another script) only ever group with
    entries of their own script."""
    groups: list[tuple[list[int], list[str]]] = []
    for topic_id, text in texts.items():
        best: tuple[float, list[int], list[str]] | None = None
        for ids, pooled in groups:
            overlap = subject_overlap(text, "\n".join(pooled))
            if overlap is not None and may_share_subject(*overlap, threshold=threshold):
                if best is None or overlap[0] > best[0]:
                    best = (overlap[0], ids, pooled)
        if best is None:
            groups.append(([topic_id], [text]))
        else:
            best[1].append(topic_id)
            best[2].append(text)
    return [ids for ids, _ in groups if len(ids) > 1]


def may_share_subject(
    similarity: float, shared: int, *, threshold: float = SAME_SUBJECT_THRESHOLD
) -> bool:
    """Whether two texts go in one group for a model to consider: a similarity of at least
    ``threshold`` with ``MIN_SHARED_TERMS`` terms in common, or one term and a cosine of
    ``ONE_TERM_THRESHOLD`` (bench.consolidation.similarity's ``group`` rows)."""
    if similarity < threshold:
        return False
    return shared >= MIN_SHARED_TERMS or similarity >= ONE_TERM_THRESHOLD


def dropped_entry(merged: str, texts: Mapping[int, str]) -> int | None:
    """The first entry (of ``texts``: each entry's title and summary) of which the merged
    text keeps less than ``KEPT_TERMS_SHARE`` of the subject terms; None when it keeps
    enough of each (an entry in another script than the merged text cannot be compared)."""
    for topic_id, text in texts.items():
        share = kept_share(text, merged)
        if share is not None and share < KEPT_TERMS_SHARE:
            return topic_id
    return None


def unrelated_reason(topic_id: int, similarity: float) -> str:
    return (
        f"unrelated: entry #{topic_id} shares too little with the other entries it names "
        f"(subject similarity {similarity:.2f}, below {SAME_SUBJECT_THRESHOLD:.2f})"
    )


# --- the offline pass ------------------------------------------------------------------------


def offline_answer(entries: Sequence[ConsolidationEntry]) -> dict:
    """The model-free pass's proposal, in the model's JSON form: near-duplicates merged."""
    candidates = [entry for entry in entries if not entry.deprecated and not entry.curated]
    groups = near_duplicate_groups(
        [headline(entry.title, entry.summary) for entry in candidates],
        similar=near_duplicates,
    )
    operations = []
    for group in groups:
        members = [candidates[i] for i in group]  # oldest first, as the block orders them
        summary = merged_summary(members)
        if summary is None:
            continue
        newest = members[-1]
        operations.append(
            {
                "op": "merge",
                "ids": [entry.topic_id for entry in members],
                "into": newest.topic_id,
                "title": newest.title,
                "summary": summary,
            }
        )
    return {"operations": operations}


def headline(title: str, summary: str) -> str:
    """What the offline pass compares: the title and the summary's first line. An entry it
    merged before carries the older entries' sentences on later lines; compared whole, it
    would gather every subject near it (a merged "Testing" entry holding "PostgreSQL"
    would pull in the ledger)."""
    return entry_text(title, summary.strip().split("\n", 1)[0])


def near_duplicates(
    first: str, second: str, *, threshold: float = NEAR_DUPLICATE_THRESHOLD
) -> bool:
    """Whether the offline pass takes two entries' texts for one subject."""
    overlap = subject_overlap(first, second)
    if overlap is None:
        return False
    similarity, shared = overlap
    return similarity >= threshold and shared >= MIN_SHARED_TERMS


def near_duplicate_groups(
    texts: Sequence[str], *, similar: Callable[[str, str], bool]
) -> list[list[int]]:
    """Indexes of ``texts`` (oldest first) in groups of two or more, in index order: the
    newest text not yet grouped gathers every older one ``similar`` to it, itself; no
    chains (A like B, B like C does not make A like C)."""
    grouped: set[int] = set()
    groups = []
    for target in reversed(range(len(texts))):
        if target in grouped:
            continue
        group = [i for i in range(target) if i not in grouped and similar(texts[i], texts[target])]
        if group:
            grouped.update(group)
            grouped.add(target)
            groups.append([*group, target])
    groups.reverse()
    return groups


def merged_summary(members: Sequence[ConsolidationEntry]) -> str | None:
    """The newest entry's summary, then each sentence of the older ones that brings a
    subject word it lacks, behind its day ("2026-01-09: ..."); None when that would not
    fit a summary."""
    newest = members[-1]
    known = set(topic_terms(entry_text(newest.title, newest.summary)))
    parts = [newest.summary]
    for entry in reversed(members[:-1]):
        added = []
        for sentence in _sentences(entry.summary):
            terms = set(topic_terms(sentence))
            if terms - known:
                added.append(sentence)
                known |= terms
        if added:
            parts.append(f"{entry.day or 'Earlier'}: {' '.join(added)}")
    summary = "\n".join(part for part in parts if part)
    return summary if len(summary) <= MAX_SUMMARY_CHARS else None


def _sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]
