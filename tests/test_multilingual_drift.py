"""Text statistics and conversational cues in the languages people chat in (no database).

French elision and accents, follow-up questions that name no subject of their own, and
the detector's verdicts on threads built from them.
"""

from __future__ import annotations

import pytest

from memory.drift.cues import exchange_cues
from memory.drift.detectors import LexicalDetector, Turn
from memory.drift.dialogue_cues import announces_switch, leans_on_topic, opens_with_reference
from memory.text.stats import content_terms, language_of, stem


def _alternating(*texts: str) -> list[Turn]:
    return [Turn("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(texts)]


def test_french_elision_keeps_the_word_after_the_apostrophe_in_both_spellings() -> None:
    terms = content_terms("Combien coûte l'appartement ? L’assurance d’habitation, qu'il dit.")
    assert stem("appartement", "fr") in terms
    assert {"assur", "habit"} <= set(terms)
    assert not {"l", "d", "qu", "l'appart", "qu'il"} & set(terms)


def test_english_possessive_keeps_the_owner_and_contractions_stay_stop_words() -> None:
    assert content_terms("my neighbour's dog doesn't stop") == ["neighbour", "dog", "stop"]


def test_accents_are_folded_in_latin_scripts_but_cyrillic_keeps_its_letters() -> None:
    assert content_terms("école canapé") == content_terms("ecole canape")
    assert content_terms("Die Übergröße passt") == content_terms("Die Ubergroße passt")
    assert content_terms("C'est très joli") == content_terms("C'est tres joli")
    assert "й" in content_terms("Купил йогурт")[-1]


def test_elided_french_stop_words_vote_for_french() -> None:
    assert language_of("L'eau qu'on boit n'est pas chaude") == "fr"


@pytest.mark.parametrize(
    "text",
    [
        "А сколько это стоит?",
        "А комары там сильно кусают?",
        "And what about the weather up there?",
        "Et s’il pleut ?",
        "¿Y eso cuánto cuesta?",
        "Wie ist das Wetter dort im Mai?",
        "それっていくらくらいかかりますか？",
    ],
)
def test_short_questions_that_point_back_lean_on_the_topic(text: str) -> None:
    assert leans_on_topic(text)


@pytest.mark.parametrize(
    "text",
    [
        # names a subject of its own, though "they" points somewhere
        "How do I cancel my gym membership if they keep ignoring my emails?",
        "Mon passeport expire en mars. Combien de temps faut-il pour en refaire un ?",
        # announces a new subject, though "это" points back
        "Это из другой оперы, но как выбрать матрас?",
        # points nowhere
        "How do I make pancakes?",
    ],
)
def test_questions_that_name_or_announce_a_subject_do_not_lean_on_the_topic(text: str) -> None:
    assert not leans_on_topic(text)


@pytest.mark.parametrize(
    ("text", "switch"),
    [
        ("D’accord. Rien à voir, mais tu sais régler un dérailleur ?", True),
        ("Bon, hors sujet : comment réussir une pâte brisée ?", True),
        ("À part ça, tu connais un bon livre sur Rome ?", True),
        ("Mal was anderes: Wie backe ich Brot?", True),
        ("Это из другой оперы, но как выбрать матрас?", True),
        ("Sinon, je peux utiliser du vinaigre ?", False),  # "otherwise", a follow-up
        ("Et pour la peinture, rien de spécial ?", False),
    ],
)
def test_french_german_and_russian_switch_cues(text: str, switch: bool) -> None:
    assert announces_switch(text) is switch


def test_pronouns_open_a_reference_in_every_language() -> None:
    assert opens_with_reference("Ça coûte combien ?")
    assert opens_with_reference("Это дорого?")
    assert not opens_with_reference("Le vélo coûte combien ?")


# A single-subject Russian chat (a winter trip to Lake Baikal) whose follow-ups share no
# word with the topic: cost, mosquitoes... nothing the first question named.
BAIKAL = _alternating(
    "Хотим в феврале поехать на Байкал посмотреть на лёд. С чего начать планирование?",
    "Определитесь, где будете жить: на Ольхоне, в Листвянке или в Большом Голоустном. "
    "Большинство едут через Иркутск, куда удобно долететь. На Ольхон в феврале добираются по "
    "ледовой переправе, так что жильё стоит бронировать заранее.",
    "Какую одежду брать?",
    "Морозы бывают до минус двадцати пяти, а на льду дует сильный ветер. Нужны пуховик, "
    "термобельё, шерстяные носки и зимние ботинки с толстой подошвой. Для прогулок по льду "
    "пригодятся ледоступы на обувь.",
    "Что обязательно посмотреть на острове?",
    "Мыс Бурхан в Хужире, северную оконечность Ольхона мыс Хобой, ледяные гроты у скал. "
    "Прозрачный лёд лучше всего видно там, где ветер сдувает снег. Экскурсии по льду на УАЗике "
    "проводят местные водители.",
    "А сколько это стоит?",
    "Перелёт из Москвы в Иркутск и обратно обычно от двадцати до тридцати пяти тысяч рублей. "
    "Жильё на Ольхоне от трёх до семи тысяч за ночь, экскурсия на УАЗике около пяти тысяч с "
    "человека. На неделю на двоих разумно закладывать от ста пятидесяти тысяч.",
    "А связь там есть?",
    "В Иркутске и Листвянке связь хорошая, в Хужире обычно тоже ловит мобильный интернет. На "
    "севере острова и на льду связь пропадает, поэтому скачайте офлайн-карты заранее и "
    "договоритесь с водителем о времени возвращения.",
    "А если лёд треснет?",
    "Трещины бывают, особенно в оттепель, поэтому по льду лучше ездить с опытными местными "
    "водителями. Они знают безопасные маршруты и объезжают разломы. Сами по незнакомому льду "
    "далеко не уходите.",
)


def test_short_follow_ups_that_share_no_word_with_the_topic_do_not_fork_it() -> None:
    detector = LexicalDetector()
    for end in range(4, len(BAIKAL) + 1):
        assert not detector.detect(BAIKAL[:end], scan_back=10).drifted, end


def test_follow_up_cues_say_the_cost_question_names_no_subject_of_its_own() -> None:
    cues = exchange_cues(BAIKAL, [4, 6])
    assert cues[6]["leans_on_topic"] == 1.0 and cues[4]["leans_on_topic"] == 0.0
    assert cues[6]["names_subject"] < cues[4]["names_subject"]


# French: repainting a bedroom, then (unannounced) bank fees, each question full of elided
# words ("l'enduit", "d'un", "qu'elle", "l’agence").
PAINT_THEN_BANK = _alternating(
    "Je veux repeindre ma chambre moi-même. Qu'est-ce qu'il me faut comme matériel ?",
    "Il te faut un rouleau à poils moyens, une brosse à rechampir pour les angles, un bac, du "
    "ruban de masquage et des bâches pour protéger le sol. Prévois aussi de l'enduit et un "
    "couteau à enduire pour reboucher les trous. Une sous-couche est utile si le mur est très "
    "foncé ou neuf.",
    "Les murs ont des petites fissures. Je les rebouche comment ?",
    "Ouvre légèrement la fissure avec un grattoir, dépoussière-la, puis applique l'enduit de "
    "rebouchage en croisant les passes. Laisse sécher, ponce au papier fin et dépoussière "
    "encore. Les fissures qui reviennent après l'hiver demandent une bande à fissures.",
    "Combien de couches de peinture je dois passer ?",
    "En général deux couches, en respectant le temps de séchage indiqué sur le pot entre les "
    "deux. Commence par les angles au pinceau, puis le rouleau en bandes verticales qui se "
    "chevauchent. Une peinture de bonne qualité couvre mieux et fait gagner une couche.",
    "Ma banque me facture quinze euros de frais de tenue de compte par trimestre. Est-ce que "
    "je peux les contester ?",
    "Ces frais sont légaux s'ils figurent dans la plaquette tarifaire que tu as acceptée, "
    "mais tu peux toujours les négocier avec ton conseiller. Rappelle ton ancienneté et les "
    "offres des banques en ligne, souvent sans frais. Si l’agence refuse, le service "
    "réclamations puis le médiateur bancaire peuvent être saisis gratuitement.",
    "Et si je change de banque, c'est compliqué ?",
    "Non, la mobilité bancaire est gratuite : la nouvelle banque s'occupe de transférer les "
    "prélèvements et virements réguliers en une vingtaine de jours. Garde l'ancien compte "
    "ouvert un ou deux mois pour les opérations tardives, puis clôture-le par courrier.",
)


def test_unannounced_french_switch_forks_at_its_first_question() -> None:
    verdict = LexicalDetector().detect(PAINT_THEN_BANK, scan_back=10)
    assert (verdict.drifted, verdict.start) == (True, 6)
