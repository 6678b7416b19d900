"""Consolidation's rules: a model's merge must be about one subject, the offline pass, facts.

The model is the fake OpenAI-compatible server; the offline pass runs with no endpoint
configured. The thresholds are measured by bench.consolidation.similarity.
"""

import json

import pytest

from memory.actions.consolidation import NOTHING_TO_ASK, do_consolidate, do_undo_consolidation
from memory.actions.consolidation.prompt import (
    CONSOLIDATION_FACTS_PROMPT,
    CONSOLIDATION_SCHEMA_NAME,
)
from memory.actions.consolidation.rules import (
    dropped_entry,
    entry_text,
    subject_groups,
    unrelated_entry,
)
from memory.models import ConsolidationRun, MemoryDecision
from memory.stores.consolidation import Scope, scope_block, topic_fields
from memory.stores.memory_sources import runs_operations
from tests.fake_openai import shown_records
from tests.memory_builders import add_topic
from tests.test_consolidation import fresh, merge

LEDGER = "Ledger on PostgreSQL 16, entries partitioned by month, JSONB metadata."


def block(session) -> str:
    return scope_block(Scope.of_session(session), budget=session.agent.memory_token_budget)


def model_operations(run):
    """What the run applied of the model's answer (not the rules' near-duplicate merges)."""
    return [op for op in run.applied if op.get("by") != "rules"]


def in_memory(session, title, summary, age_days, **flags):
    topic = add_topic(session, title=title, summary=summary, keep=True, age_days=age_days)
    if flags:
        for name, value in flags.items():
            setattr(topic, name, value)
        topic.save()
    return topic


# --- a model's merge goes through the same checks as the user's input --------------------


def test_an_unrelated_merge_is_refused_and_audited_while_a_related_one_applies(
    fake_openai, alice, agent, session
):
    ledger = in_memory(session, "Ledger storage", "Ledger on PostgreSQL.", 30)
    again = in_memory(
        session, "Ledger database", "The ledger moves to version 16 of the database.", 20
    )
    lisbon = in_memory(session, "Offsite city", "We chose Lisbon for the offsite.", 10)
    in_memory(session, "Offsite dates", "The offsite is the first week of May.", 8)
    weather = in_memory(session, "Weather chat", "Small talk about rain.", 5)
    in_memory(session, "Weather again", "It was sunny at last.", 4)
    before = {t.pk: topic_fields(t) for t in (lisbon, weather)}
    # Named alike, they are shown in one group: the model may propose it, text decides.
    fake_openai.name_subjects({"Offsite city": "outdoors", "Weather chat": "outdoors"})
    fake_openai.propose(
        merge(lisbon, weather, title="Offsite", summary="Lisbon; rain."),
        merge(ledger, again),
    )

    run = do_consolidate(agent=agent, user=alice)

    assert run.status == "applied"
    (applied,) = run.applied
    assert applied["into"] == again.pk and fresh(ledger).keep_in_memory is False
    (refused,) = run.refused
    assert refused["ids"] == [lisbon.pk, weather.pk]
    assert refused["reason"].startswith("unrelated: entry #")
    assert "shares too little" in refused["reason"]
    assert {t.pk: topic_fields(fresh(t)) for t in (lisbon, weather)} == before
    assert not MemoryDecision.objects.filter(consolidation=run, topic__in=[lisbon, weather])
    assert "Offsite city: We chose Lisbon" in run.block_after


def test_a_supersede_across_subjects_is_refused_and_one_within_a_subject_applies(
    fake_openai, alice, agent, session
):
    """A supersede says the later entry reversed the earlier one's decision: about one
    subject, checked like a merge (the real 1.5B model deprecated unrelated entries)."""
    lisbon = in_memory(session, "Offsite city", "We chose Lisbon for the offsite.", 30)
    ledger = in_memory(session, "Ledger storage", "Ledger on PostgreSQL.", 20)
    in_memory(session, "Ledger database", "The ledger moves to version 16 of the database.", 15)
    porto = in_memory(session, "Offsite city changed", "The offsite moves to Porto.", 10)
    fake_openai.name_subjects({"Offsite city changed": "storage", "Ledger storage": "storage"})
    fake_openai.propose(
        {"op": "supersede", "old": ledger.pk, "new": porto.pk},
        {"op": "supersede", "old": lisbon.pk, "new": porto.pk},
    )

    run = do_consolidate(agent=agent, user=alice)

    (applied,) = run.applied
    assert (applied["old"], applied["new"]) == (lisbon.pk, porto.pk) and fresh(lisbon).deprecated
    (refused,) = run.refused
    assert (refused["old"], refused["new"]) == (ledger.pk, porto.pk)
    assert refused["reason"].startswith("unrelated: entry #")
    assert not fresh(ledger).deprecated


def test_an_operation_naming_an_entry_its_call_did_not_show_is_refused(
    fake_openai, alice, agent, session
):
    """Each call's answer is read against what that call showed: the 1.5B model, shown
    every group at once, merged "Offsite planning" into the budget's entries of the next
    group (they share "budget"). Here the offsite's call names the budget sheet."""
    offsite = in_memory(session, "Offsite planning", "Lisbon offsite: budget 9k EUR.", 30)
    in_memory(session, "Offsite moved", "The Lisbon offsite moves to Porto.", 25)
    sheet = in_memory(session, "Budget spreadsheet", "Household budget sheet by month.", 20)
    app = in_memory(session, "Budget app", "The household budget sheet moves to an app.", 10)
    across = merge(offsite, sheet, title="Budget", summary="Offsite and household budget.")
    fake_openai.propose(
        across, merge(sheet, app, title="Budget app", summary="Household budget in an app.")
    )

    run = do_consolidate(agent=agent, user=alice)

    offsite_call, _ = fake_openai.requests
    assert offsite.pk in {record["id"] for record in shown_records(offsite_call)}
    assert sheet.pk not in {record["id"] for record in shown_records(offsite_call)}
    (applied,) = model_operations(run)
    assert applied["ids"] == [sheet.pk, app.pk]
    (refused,) = run.refused
    assert refused["op"] == "unusable" and json.loads(refused["proposed"]) == across
    assert refused["reason"] == f"operation 1 names an entry that was not shown: {sheet.pk}"
    assert "Offsite and household budget" not in run.block_after
    assert fresh(sheet).title == "Budget spreadsheet"  # merged away into the app, unchanged


def test_the_entry_sharing_least_with_the_rest_of_a_merge_is_named():
    texts = {
        1: entry_text("Ledger storage", "Ledger on PostgreSQL."),
        2: entry_text("Ledger database", "Ledger stays on PostgreSQL 16."),
        3: entry_text("Weather chat", "Small talk about rain."),
    }
    weakest = unrelated_entry(texts)
    assert weakest is not None and weakest[0] == 3
    del texts[3]
    assert unrelated_entry(texts) is None
    # Japanese beside English: words cannot compare them, so the model's judgement stands.
    mixed = {1: "Learning Japanese\nGenki I.", 2: "日本語の勉強\n漢字を毎日。"}
    assert unrelated_entry(mixed) is None


# --- what the model is shown: entries that may share a subject, in groups ----------------------


def test_entries_are_grouped_by_subject_and_one_alone_is_in_no_group():
    texts = {
        1: entry_text("Ledger storage", "Ledger on PostgreSQL."),
        2: entry_text("Offsite city", "We chose Lisbon for the offsite."),
        3: entry_text("Weather chat", "Small talk about rain."),
        4: entry_text("Ledger database", "Ledger stays on PostgreSQL 16."),
        5: entry_text("Offsite moved", "The offsite moves to Porto."),
        6: entry_text("日本語の勉強", "漢字を毎日。"),
    }
    assert subject_groups(texts) == [[1, 4], [2, 5]]


def test_the_model_is_not_asked_when_no_two_entries_share_a_subject(
    fake_openai, alice, agent, session
):
    in_memory(session, "Ledger storage", "Ledger on PostgreSQL.", 20)
    in_memory(session, "Weather chat", "Small talk about rain.", 10)
    in_memory(session, "Offsite city", "We chose Lisbon for the offsite.", 5)
    before = block(session)

    run = do_consolidate(agent=agent, user=alice)

    assert fake_openai.requests == []
    assert (run.status, run.entries_sent) == ("nothing", 0)
    assert run.detail == NOTHING_TO_ASK
    assert block(session) == before


def test_a_group_where_nothing_could_change_is_not_asked(fake_openai, alice, agent, session):
    """A group whose other entries are deprecated, or all the user's with only a fact the
    user set, has nothing the consolidator may do: its call is not made; the group beside
    it is asked."""
    from memory.stores.facts import set_fact

    set_fact(user=alice, agent=agent, key="piano_teacher", value="Ana", actor="user")
    in_memory(session, "Offsite city", "We chose Lisbon for the offsite.", 30, deprecated=True)
    in_memory(session, "Offsite moved", "We switched the offsite to Porto.", 25)
    pinned = {"keep_in_memory_manually_set": True}
    in_memory(session, "Piano lessons", "Piano lessons on Tuesdays.", 20, **pinned)
    in_memory(session, "Piano teacher", "The piano teacher is Ana.", 15, **pinned)
    ledger = in_memory(session, "Ledger storage", "Ledger on PostgreSQL.", 10)
    again = in_memory(session, "Ledger database", "Ledger stays on PostgreSQL 16.", 5)
    fake_openai.reply_json({"operations": []})

    run = do_consolidate(agent=agent, user=alice)

    (request,) = fake_openai.requests
    assert [record["id"] for record in shown_records(request)] == [ledger.pk, again.pk]
    assert run.entries_sent == 2


def test_the_model_picks_among_neighbours_only(fake_openai, alice, agent, session):
    """The small talk that shares its subject with nothing is not shown: a small model shown
    the whole block named entries of different subjects together."""
    ledger = in_memory(session, "Ledger storage", "Ledger on PostgreSQL.", 20)
    weather = in_memory(session, "Weather chat", "Small talk about rain.", 10)
    again = in_memory(session, "Ledger database", "Ledger stays on PostgreSQL 16.", 5)
    fake_openai.propose(merge(ledger, weather))

    run = do_consolidate(agent=agent, user=alice)

    (request,) = fake_openai.requests  # one group: one call
    assert [record["id"] for record in shown_records(request)] == [ledger.pk, again.pk]
    assert "Weather" not in request["messages"][1]["content"]
    assert run.status == "unusable" and "was not shown" in run.detail
    assert fresh(weather).keep_in_memory and fresh(ledger).keep_in_memory


# --- the offline pass -------------------------------------------------------------------------


@pytest.fixture
def offline(settings):
    settings.OPENAI_BASE_URL = settings.OPENAI_API_KEY = ""


def test_the_offline_pass_merges_near_duplicates_only_and_undo_restores_the_block(
    fake_openai, offline, alice, agent, session
):
    older = in_memory(session, "Ledger storage", LEDGER + " Nightly backups.", 40)
    newer = in_memory(session, "Ledger database", LEDGER, 30)
    pinned = in_memory(
        session, "Ledger notes", LEDGER, 25, keep_in_memory_manually_set=True
    )  # the user's: never touched, even as a near-duplicate
    lisbon = in_memory(session, "Offsite city", "We chose Lisbon for the offsite.", 20)
    porto = in_memory(session, "Offsite moved", "We switched the offsite to Porto.", 10)
    untouched = {t.pk: topic_fields(t) for t in (pinned, lisbon, porto)}
    block_before = block(session)

    run = do_consolidate(agent=agent, user=alice)

    assert (run.status, run.model_name) == ("applied", "offline") and fake_openai.requests == []
    assert [op["op"] for op in run.proposal] == ["merge"]  # never a supersede
    (applied,) = run.applied
    assert (applied["ids"], applied["into"]) == ([older.pk, newer.pk], newer.pk)
    assert fresh(older).keep_in_memory is False and not fresh(older).deprecated
    merged = fresh(newer)
    assert merged.title == "Ledger database"
    assert merged.summary.startswith(LEDGER) and "Nightly backups." in merged.summary
    assert {t.pk: topic_fields(fresh(t)) for t in (pinned, lisbon, porto)} == untouched
    assert not any(fresh(t).deprecated for t in (older, newer, lisbon, porto))

    do_undo_consolidation(run=run, user=alice)
    assert block(session) == block_before
    assert ConsolidationRun.objects.get().status == "undone"


def test_the_offline_pass_leaves_entries_of_different_subjects_alone(
    offline, alice, agent, session
):
    in_memory(session, "Ledger storage", LEDGER, 30)
    in_memory(session, "Marathon plan", "Berlin marathon: four runs a week, long run Sundays.", 20)
    block_before = block(session)

    run = do_consolidate(agent=agent, user=alice)

    assert (run.status, run.applied, run.proposal) == ("nothing", [], [])
    assert block(session) == block_before


@pytest.mark.parametrize("answer", ["nothing", "a supersede"])
def test_near_duplicates_a_model_left_alone_are_merged_by_the_rules_beside_its_answer(
    fake_openai, alice, agent, session, answer
):
    """Near-duplicates (what text statistics alone can tell is one subject: the offline
    pass's merges) are merged even when the model, asked about them, proposed nothing for
    them; marked as the rules', and undone with the rest. The entries the model changed are
    left to the model."""
    older = in_memory(session, "Ledger storage", LEDGER + " Nightly backups.", 40)
    newer = in_memory(session, "Ledger database", LEDGER, 30)
    lisbon = in_memory(session, "Offsite city", "We chose Lisbon for the offsite.", 20)
    porto = in_memory(session, "Offsite city", "We chose Porto for the offsite instead.", 10)
    block_before = block(session)
    operations = {
        "nothing": [],
        "a supersede": [{"op": "supersede", "old": lisbon.pk, "new": porto.pk}],
    }[answer]
    fake_openai.propose(*operations)

    run = do_consolidate(agent=agent, user=alice)

    assert run.status == "applied" and run.proposal == operations  # the model's, as written
    by_rules = [(op["ids"], op["into"]) for op in run.applied if op.get("by") == "rules"]
    assert fresh(older).keep_in_memory is False and "Nightly backups." in fresh(newer).summary
    if answer == "nothing":  # the offsite pair is near-duplicate text too: merged, both dated
        assert by_rules == [([older.pk, newer.pk], newer.pk), ([lisbon.pk, porto.pk], porto.pk)]
        assert "We chose Lisbon" in fresh(porto).summary and not fresh(lisbon).deprecated
    else:  # the model judged it: the rules leave the entries it changed to it
        assert by_rules == [([older.pk, newer.pk], newer.pk)]
        assert fresh(lisbon).deprecated and fresh(porto).summary.startswith("We chose Porto")
    assert len(run.applied) == len(operations) + len(by_rules)

    described = runs_operations([run])[run.pk]  # as the panel and REST show the run
    assert [op["by"] for op in described if op["op"] == "merge"] == ["rules"] * len(by_rules)
    do_undo_consolidation(run=run, user=alice)
    assert block(session) == block_before


def test_an_unusable_answer_changes_nothing_even_where_the_rules_would_merge(
    fake_openai, alice, agent, session
):
    older = in_memory(session, "Ledger storage", LEDGER + " Nightly backups.", 40)
    in_memory(session, "Ledger database", LEDGER, 30)
    block_before = block(session)
    fake_openai.reply_raw_content("this is not JSON")

    run = do_consolidate(agent=agent, user=alice)

    assert (run.status, run.applied) == ("failed", [])
    assert fresh(older).keep_in_memory and block(session) == block_before


def test_the_offline_pass_groups_around_the_newest_entry_without_chains():
    from memory.actions.consolidation.rules import near_duplicate_groups

    like = {frozenset("ab"), frozenset("bc"), frozenset("de")}  # a~b, b~c, d~e; not a~c

    def similar(first, second):
        return frozenset((first, second)) in like

    assert near_duplicate_groups(list("abcde"), similar=similar) == [[1, 2], [3, 4]]


# --- the fact operation -----------------------------------------------------------------------


@pytest.fixture
def facts(alice, agent, session):
    """Three entries, a fact the agent set twice (city) and one the user set (diet), each
    sharing its subject with an entry, and one that shares it with none (piano)."""
    from memory.stores.facts import set_fact

    in_memory(session, "Offsite city", "We chose Lisbon for the offsite.", 20)
    in_memory(session, "Moved", "The user moved from Lyon to Porto in May.", 5)
    in_memory(session, "Diet", "The user keeps a vegan diet since June.", 4)
    set_fact(user=alice, agent=agent, key="piano", value="a Yamaha upright", actor="agent")
    set_fact(user=alice, agent=agent, key="city", value="Paris", actor="agent")
    set_fact(user=alice, agent=agent, key="city", value="Lyon", actor="agent")
    set_fact(user=alice, agent=agent, key="diet", value="vegetarian", actor="user")


def fact(alice, agent, key):
    from memory.stores.facts import read_fact

    return read_fact(user=alice, agent=agent, key=key)


def fact_op(key, value="", outdated=False):
    return {"op": "fact", "key": key, "value": value, "outdated": outdated}


def vegan_diet(session):
    """A second entry on the diet: its group is asked (a merge could apply) and shown the
    diet, a fact the user set (alone, the diet's entry is not asked: nothing could change)."""
    return in_memory(session, "Vegan diet", "The user eats vegan since June: no dairy.", 2)


def test_a_fact_op_updates_an_agent_set_fact_is_refused_on_a_user_set_one_and_undo_restores(
    fake_openai, facts, alice, agent, session
):
    vegan_diet(session)
    city_before, diet_before = fact(alice, agent, "city"), fact(alice, agent, "diet")
    fake_openai.propose(fact_op("city", "Porto"), fact_op("diet", "vegan"))

    run = do_consolidate(agent=agent, user=alice)

    # A call a group, each shown the facts that share its subject, and only those.
    for request in fake_openai.requests:
        assert request["messages"][0]["content"] == CONSOLIDATION_FACTS_PROMPT
        assert '"fact"' in json.dumps(request["response_format"])
    content = "\n".join(r["messages"][1]["content"] for r in fake_openai.requests)
    assert '"fact": "diet", "value": "vegetarian", "set_by": "user"' in content
    assert '"fact": "city", "value": "Lyon", "set_by": "agent"' in content
    assert '"piano"' not in content
    assert run.status == "applied"
    (applied,) = model_operations(run)
    assert (applied["key"], applied["before"]["value"], applied["after"]["value"]) == (
        "city",
        "Lyon",
        "Porto",
    )
    city = fact(alice, agent, "city")
    assert (city["value"], city["provenance"]["actor"]) == ("Porto", "consolidator")
    assert city["history"][0]["actor"] == "consolidator"
    (refused,) = run.refused
    assert refused["key"] == "diet" and "set by the user" in refused["reason"]
    assert fact(alice, agent, "diet") == diet_before

    do_undo_consolidation(run=run, user=alice)
    assert fact(alice, agent, "city") == city_before  # value, actor, set_at and history


def test_a_fact_marked_outdated_leaves_the_facts_and_undo_brings_it_back(
    fake_openai, facts, alice, agent
):
    before = fact(alice, agent, "city")
    fake_openai.propose(fact_op("city", outdated=True))

    run = do_consolidate(agent=agent, user=alice)

    assert run.status == "applied"
    gone = fact(alice, agent, "city")
    assert gone["found"] is False
    assert (gone["history"][0]["action"], gone["history"][0]["actor"]) == ("unset", "consolidator")
    do_undo_consolidation(run=run, user=alice)
    assert fact(alice, agent, "city") == before


def test_undo_refuses_when_the_fact_changed_since(fake_openai, facts, alice, agent):
    from memory.actions.consolidation import ConsolidationConflict
    from memory.stores.facts import set_fact

    fake_openai.propose(fact_op("city", "Porto"))
    run = do_consolidate(agent=agent, user=alice)
    set_fact(user=alice, agent=agent, key="city", value="Braga", actor="user")

    with pytest.raises(ConsolidationConflict, match="fact 'city' changed since"):
        do_undo_consolidation(run=run, user=alice)
    assert fact(alice, agent, "city")["value"] == "Braga"


@pytest.mark.parametrize(
    ("operation", "said"),
    [
        (fact_op("hometown", "Porto"), "names a fact that was not shown: 'hometown'"),
        (fact_op("city", "x" * 2_100), "longer than 2000 characters"),
        (fact_op("city", "Porto", outdated=True), "either updated or outdated, not both"),
        (fact_op("city", ""), "a fact needs a value"),
    ],
)
def test_an_unusable_fact_op_changes_nothing_and_says_why(
    fake_openai, facts, alice, agent, session, operation, said
):
    before = fact(alice, agent, "city")
    block_before = block(session)
    fake_openai.reply_json({"operations": [operation]})

    run = do_consolidate(agent=agent, user=alice)

    assert run.status == "unusable" and said in run.detail, run.detail
    assert fact(alice, agent, "city") == before and block(session) == block_before


def test_an_unusable_fact_op_beside_a_usable_one_is_refused_alone(
    fake_openai, facts, alice, agent, session
):
    fake_openai.reply_json({"operations": [fact_op("city", "Porto"), fact_op("hometown", "Porto")]})

    run = do_consolidate(agent=agent, user=alice)

    assert run.status == "applied" and [op["key"] for op in run.applied] == ["city"]
    (refused,) = run.refused
    assert "names a fact that was not shown: 'hometown'" in refused["reason"]
    assert fact(alice, agent, "city")["value"] == "Porto"


def entries_of(session):
    from memory.models import Topic

    return list(Topic.objects.filter(session=session, keep_in_memory=True).order_by("pk"))


def test_a_supersede_written_backwards_deprecates_the_earlier_decision(
    fake_openai, alice, agent, session
):
    """Small models swap "old" and "new"; the later entry is the current state either way,
    and the run's proposal keeps what the model wrote."""
    lisbon = in_memory(session, "Offsite city", "We chose Lisbon for the offsite.", 30)
    porto = in_memory(session, "Offsite moved", "The offsite moves to Porto.", 10)
    backwards = {"op": "supersede", "old": porto.pk, "new": lisbon.pk}
    fake_openai.propose(backwards)

    run = do_consolidate(agent=agent, user=alice)

    (applied,) = run.applied
    assert (applied["old"], applied["superseded_by"]) == (lisbon.pk, porto.pk)
    assert fresh(lisbon).deprecated and not fresh(porto).deprecated
    assert run.proposal == [backwards]


def test_a_supersede_written_backwards_still_never_deprecates_a_users_entry(
    fake_openai, alice, agent, session
):
    lisbon = in_memory(
        session,
        "Offsite city",
        "We chose Lisbon for the offsite.",
        30,
        keep_in_memory_manually_set=True,
    )
    porto = in_memory(session, "Offsite moved", "The offsite moves to Porto.", 10)
    fake_openai.propose({"op": "supersede", "old": porto.pk, "new": lisbon.pk})

    run = do_consolidate(agent=agent, user=alice)

    (refused,) = run.refused
    assert "curated by the user" in refused["reason"]
    assert not fresh(lisbon).deprecated and not fresh(porto).deprecated


def test_a_fact_op_from_a_call_that_did_not_show_the_fact_is_refused(
    fake_openai, facts, alice, agent, session
):
    """Each call shows the facts of its entries' subject only, and its answer is read
    against them: every call here proposes the city, and only the one shown it applies."""
    vegan_diet(session)
    fake_openai.fallbacks[CONSOLIDATION_SCHEMA_NAME] = lambda body: json.dumps(
        {"operations": [fact_op("city", "Porto")]}
    )

    run = do_consolidate(agent=agent, user=alice)

    shown = [{r.get("fact") for r in shown_records(body)} for body in fake_openai.requests]
    assert ["city" in facts for facts in shown] == [True, True, False]  # the diet's call
    assert [(op["key"], op["after"]["value"]) for op in model_operations(run)] == [
        ("city", "Porto")
    ]
    not_shown, again = run.refused
    assert not_shown["reason"] == "operation 1 names a fact that was not shown: 'city'"
    assert again["reason"] == "fact 'city' already has that value"  # the second city call
    assert fact(alice, agent, "diet")["value"] == "vegetarian"


def test_a_merged_text_that_keeps_too_little_of_an_entry_names_that_entry():
    entries = {
        1: entry_text("Master choice", "J'ai choisi Lyon pour le master, rentrée le 14 septembre."),
        2: entry_text("Master rhythm", "Trois jours en entreprise et deux jours à la fac."),
    }
    lossy = entry_text("Master", "Trois jours en entreprise, deux jours à la fac.")
    whole = entry_text(
        "Master à Lyon",
        "Choisi Lyon, rentrée le 14 septembre; trois jours en entreprise, deux à la fac.",
    )

    assert dropped_entry(lossy, entries) == 1
    assert dropped_entry(whole, entries) is None
    # An entry in another script than the merged text cannot be compared: not named.
    japanese = {3: entry_text("日本語の勉強", "毎日三十分、げんき教科書で勉強している。")}
    assert dropped_entry(entry_text("Learning Japanese", "Genki II."), japanese) is None
