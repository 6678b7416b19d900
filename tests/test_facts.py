"""Durable facts: one document per (user, agent, organization), $set / read / $unset."""

import pytest

from memory.lib.limits import MAX_FACT_KEY_CHARS, MAX_FACT_VALUE_CHARS
from memory.models import Agent, ImportantInfo, Organization
from memory.stores.facts import FactError, read_facts, set_fact, unset_fact


def test_set_creates_the_document_then_updates_entries_by_key(alice, agent):
    assert read_facts(user=alice, agent=agent) == {}
    set_fact(user=alice, agent=agent, key="city", value="Lyon", actor="user")
    data = set_fact(user=alice, agent=agent, key="city", value="Paris", actor="user")
    set_fact(user=alice, agent=agent, key="pets", value=["cat", "dog"], actor="user")
    assert data == {"city": "Paris"}
    assert read_facts(user=alice, agent=agent) == {"city": "Paris", "pets": ["cat", "dog"]}
    assert ImportantInfo.objects.count() == 1


def test_unset_deletes_one_entry_and_says_whether_it_existed(alice, agent):
    set_fact(user=alice, agent=agent, key="a", value=1, actor="user")
    set_fact(user=alice, agent=agent, key="b", value=2, actor="user")
    assert unset_fact(user=alice, agent=agent, key="a", actor="user") is True
    assert unset_fact(user=alice, agent=agent, key="a", actor="user") is False
    assert unset_fact(user=alice, agent=agent, key="never", actor="user") is False
    assert read_facts(user=alice, agent=agent) == {"b": 2}


def test_keys_are_trimmed(alice, agent):
    set_fact(user=alice, agent=agent, key="  city ", value="Lyon", actor="user")
    assert read_facts(user=alice, agent=agent) == {"city": "Lyon"}
    assert unset_fact(user=alice, agent=agent, key="city ", actor="user") is True


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("", "x", "key must be a non-empty string"),
        ("   ", "x", "key must be a non-empty string"),
        (42, "x", "key must be a non-empty string"),
        ("k" * (MAX_FACT_KEY_CHARS + 1), "x", "longer than"),
        ("k", None, "use $unset"),
        ("k", "v" * MAX_FACT_VALUE_CHARS, "longer than"),
        ("k", float("nan"), "JSON value"),
        ("k", {1, 2}, "JSON value"),
    ],
)
def test_bad_keys_and_values_are_refused_with_a_reason(alice, agent, key, value, message):
    with pytest.raises(FactError, match=message.replace("$", r"\$")):
        set_fact(user=alice, agent=agent, key=key, value=value, actor="user")
    assert read_facts(user=alice, agent=agent) == {}


def test_each_user_agent_and_organization_has_its_own_document(alice, bob, agent, organization):
    other_agent = Agent.objects.create(organization=organization, name="Two", soul="Two.")
    other_org_agent = Agent.objects.create(
        organization=Organization.objects.create(name="Else", slug="else"), name="Drift", soul="."
    )
    set_fact(user=alice, agent=agent, key="k", value="alice-drift", actor="user")
    set_fact(user=bob, agent=agent, key="k", value="bob-drift", actor="user")
    set_fact(user=alice, agent=other_agent, key="k", value="alice-two", actor="user")
    set_fact(user=alice, agent=other_org_agent, key="k", value="alice-else", actor="user")
    assert read_facts(user=alice, agent=agent) == {"k": "alice-drift"}
    assert read_facts(user=bob, agent=agent) == {"k": "bob-drift"}
    assert read_facts(user=alice, agent=other_agent) == {"k": "alice-two"}
    assert read_facts(user=alice, agent=other_org_agent) == {"k": "alice-else"}
    assert ImportantInfo.objects.get(user=alice, agent=other_org_agent).organization_id == (
        other_org_agent.organization_id
    )
