"""How a conversational turn announces itself, in the languages people chat in.

A change of subject ("Different question: ...", "Cambiando de tema, ...", "Кстати, ...",
"ところで、..."), a return to an earlier one ("Back to ...", "Volviendo a ..."), a
follow-up ("What about ...", "Und ...", "Et ..."), or a reference to the subject at hand
by a pronoun ("What should it include?"). A cue counts only where a speaker announces the
turn (its opening clauses), not anywhere in it: "is it unrelated to ..." announces
nothing. Japanese is written without spaces or word boundaries, so its cues are looked
for at the start of the turn's first sentences.
"""

from __future__ import annotations

import re

from memory.text.stats import content_terms, words

# A turn often opens with courtesy ("Thanks. Ok, ...") before saying what it is about.
_COURTESY = re.compile(
    r"^(?:(?:ok(?:ay)?|thanks?(?: you)?(?: so much)?|great|perfect|cool|nice|awesome|"
    r"got it|sorry|alright|all right|right|oh|hmm|hey|hi|well|good to know|makes sense|"
    r"that (?:helps|makes sense)|understood|"
    r"gracias|vale|perfecto|genial|bueno|entendido|de acuerdo|ah|okey|"
    r"danke(?: schön)?|super|alles klar|gut|verstanden|prima|ach so|"
    r"merci(?: beaucoup)?|d'accord|parfait|super|très bien|compris|bon|génial|top|"
    r"спасибо|понятно|хорошо|отлично|ясно|ок|окей|ладно|ага|супер)\b[\s,.!:;\u2014\u2013-]*)+",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
_CLAUSE_END = re.compile(r"[:;?\u2014\u2013]|\s-\s|\.(?:\s|$)")

#: Phrases by which a speaker announces a change of subject, wherever they stand in
#: the opening clause ("Can I ask you a different question?").
_SWITCH_CUE = re.compile(
    r"\b(?:by the way|btw|off[- ]topic|random question|separate question|"
    r"different (?:question|topic|subject|matter|thing)|new (?:topic|subject)|"
    r"(?:another|other) (?:topic|subject|matter)|unrelated (?:question|thing|note)|"
    r"switch(?:ing)? (?:gears|topics?|subjects?)|chang(?:e|ing) (?:of |the )?(?:topics?|subject)|"
    r"on (?:an)?other note|on an? (?:different|separate|unrelated|side|lighter) note|"
    # Spanish
    r"cambi(?:o|ando|emos) de tema|otra pregunta|otro tema|por cierto|"
    r"nada que ver|sin relación|(?:algo|tema|pregunta) (?:distint[oa]|diferente|aparte)|"
    r"cambiando de tercio|otra consulta|"
    # German
    r"übrigens|andere frage|anderes thema|themenwechsel|"
    r"neues thema|nebenbei bemerkt|themawechsel|apropos|andere sache|nichts damit zu tun|"
    # French
    r"au fait|autre question|autre sujet|changement de sujet|chang(?:eons|er) de sujet|"
    r"rien à voir|sans rapport|question différente|hors[- ]sujet|dans un (?:tout )?autre registre|"
    # Russian
    r"кстати|другой вопрос|друг(?:ая|ую) тем[аеу]|смен(?:им|а) тем[ыу]|"
    r"совсем (?:другое|о другом|другой вопрос)|не по теме|на другую тему|отвлеч[её]мся|"
    r"из другой оперы|по другому поводу)\b",
    re.IGNORECASE,
)
#: Words that announce a change of subject only where a clause starts: "Unrelated,
#: but ..." and "Something else: ..." do, "is it unrelated to ..." and "laziness or
#: something else?" do not. A few words may come first ("Quick unrelated ...").
_SWITCH_OPENER = re.compile(
    r"^(?:(?:anyway|anyways|moving on|à part ça)\b|(?:(?:a|one|more|quick|random|small|little|"
    r"totally|completely|somewhat|something|also|and|but|so|now)[\s,]+){0,2}"
    r"(?:unrelated|something else|something (?:completely|totally|entirely) different)\b|"
    r"(?:(?:y|und|et|mais|pero|noch|mal|а|и)[\s,]+)?"
    r"(?:otra cosa|algo (?:totalmente |muy )?distinto|(?:tout )?autre chose|"
    r"(?:(?:ganz|völlig) )?(?:etwas |was )?(?:ganz |völlig )?anderes|совсем другое)\b)",
    re.IGNORECASE,
)
#: Phrases by which a speaker goes back to an earlier subject, where a clause starts
#: ("Back to Japan: ...", "Going back to the trip ..."), not "put it back to ...".
_RETURN_CUE = re.compile(
    r"^(?:(?:going|coming|getting|get|go|come|to|so|now|and|but|anyway|anyways|just)"
    r"[\s,]+){0,2}(?:back to|return(?:ing)? to)\b|"
    r"^(?:(?:y|pero|bueno|and|und|et|mais|а|и|ну)[\s,]+)?"
    r"(?:volv(?:iendo|amos|iendo) a|de vuelta a|retomando|"
    r"zurück zu(?:m|r)?|nochmal zu(?:m|r)?|um auf|"
    r"pour revenir à|revenons à|retour à|de retour à|je reviens à|"
    r"вернёмся к|вернемся к|возвращаясь к|вернусь к|обратно к|снова о)\b",
    re.IGNORECASE,
)
#: Japanese cues, looked for at the start of a sentence (a few characters may come first).
_JA_SWITCH = re.compile(
    r"^.{0,6}(?:ところで|話は変わ|話が変わ|話題を変え|別の質問|別件|全然違う|全く違う|"
    r"まったく違う|まったく別|全く別|関係ない)"
)
_JA_RETURN = re.compile(r"^.{0,12}(?:話を戻|に戻ります|に戻って|に戻ると|の話に戻)")
#: Openings that continue the subject at hand ("And ...", "What about ...", "Is it ...").
_FOLLOW_UP_OPENER = re.compile(
    r"^(?:and|also|so|then|but|or|what about|how about|what if|in that case|if so|if not|"
    r"(?:does|is|would|will|can|could|should) (?:that|it|this|they|these|those)|"
    r"it|that|this|these|those|they|them|same|which one|"
    r"(?:one more|one last|last|another) (?:thing|question)|"
    r"y|también|entonces|pero|und|auch|dann|aber|oder|et|aussi|alors|mais|ou|"
    r"и|а|тогда|также|но|или)\b",
    re.IGNORECASE,
)
_JA_FOLLOW_UP = re.compile(r"^(?:それ|じゃあ|では|あと|それで|その|この|そして|また)")
#: Pronouns and place words that point at the subject at hand ("is it safe?", "what's the
#: weather like up there?", "а сколько это стоит?", "¿y eso cuánto cuesta?"), per language.
#: Articles that double as pronouns ("la", "das", "lo") are left out.
_REFERENCES = frozenset(
    """
    it its that this these those they them their he she him her there
    ça cela ceci il elle ils elles celui celle ceux celles là
    eso esto ello ese esa esos esas aquello ahí allí allá
    es dies dort dabei dafür dazu damit davon darauf darüber dorthin
    это этот эта эти этого этом он она оно они его её ее их там туда тут такой такие
    """.split()
)
#: A turn naming at most this many content words beside a reference to the subject at
#: hand names no subject of its own: "А комары там сильно кусают?" asks about the trip.
LEANING_TERMS = 3


def opening_clauses(text: str, sentences: int = 2) -> list[str]:
    """First clause of each of the first ``sentences`` sentences, courtesy stripped.

    "Thanks, that helps. Different question: how do I ..." gives ["that helps",
    "Different question"]: a cue phrase counts where a speaker announces the turn,
    not anywhere in it.
    """
    body = _COURTESY.sub("", _flat(text))
    clauses = []
    for sentence in _SENTENCE_END.split(body)[:sentences]:
        clause = _CLAUSE_END.split(_COURTESY.sub("", sentence), maxsplit=1)[0].strip(" ,¿¡")
        if clause:
            clauses.append(clause)
    return clauses


def _sentence_starts(text: str, sentences: int = 2) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(_flat(text))[:sentences]]


def _flat(text: str) -> str:
    """One line, single spaces, the typographic apostrophe read as "'" ("qu’il")."""
    return " ".join(text.replace("\u2019", "'").split())


def announces_switch(text: str) -> bool:
    """Does the turn announce a new subject ("Different question: ...", "By the way, ...")?"""
    if any(_JA_SWITCH.match(s) for s in _sentence_starts(text)):
        return True
    return any(
        _SWITCH_CUE.search(clause) or _SWITCH_OPENER.match(clause)
        for clause in opening_clauses(text)
    )


def announces_return(text: str) -> bool:
    """Does the turn announce going back to an earlier subject ("Back to Japan: ...")?"""
    if any(_JA_RETURN.match(s) for s in _sentence_starts(text)):
        return True
    return any(_RETURN_CUE.match(clause) for clause in opening_clauses(text))


def opens_as_follow_up(text: str) -> bool:
    """Does the turn open like a follow-up ("And ...", "What about ...", "Is it ...")?"""
    clauses = opening_clauses(text, sentences=1)
    if not clauses:
        return False
    return bool(_FOLLOW_UP_OPENER.match(clauses[0]) or _JA_FOLLOW_UP.match(clauses[0]))


def opens_with_reference(text: str) -> bool:
    """Does the first sentence name its subject by a pronoun before any content word?

    "What should it include?" points back at the subject of the conversation;
    "How do I cancel my gym membership if they ..." names its subject first.
    """
    clauses = opening_clauses(text, sentences=1)
    for word in words(clauses[0]) if clauses else ():
        if word in _REFERENCES or _elided_reference(word):
            return True
        if content_terms(word):
            return False
    return False


def leans_on_topic(text: str) -> bool:
    """Does the turn ask about the subject at hand without naming a subject of its own?

    A short turn (at most :data:`LEANING_TERMS` content words) whose first sentence
    points back by a pronoun or a place word: "And what about the weather up there?",
    "А комары там сильно кусают?", "Et s'il pleut ?". Japanese points back by its
    demonstratives at the start (それ, その, そこ).
    """
    if len(set(content_terms(text))) > LEANING_TERMS or announces_switch(text):
        return False
    first = _sentence_starts(text, sentences=1)
    if not first:
        return False
    if _JA_FOLLOW_UP.match(first[0]) or first[0].startswith(("そこ", "あそこ")):
        return True
    return any(w in _REFERENCES or _elided_reference(w) for w in words(first[0]))


def _elided_reference(word: str) -> bool:
    """ "s'il", "qu'il", "c'est": a pronoun joined to an elided word by an apostrophe."""
    return "'" in word and any(part in _REFERENCES for part in word.split("'"))
