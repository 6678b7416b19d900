"""Operators configure, staff choose: MCP servers come from the deployment configuration;
the admin (and anything else writing an agent) can only pick among their names."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured, ValidationError

from driftless.env import mcp_servers_from_env

HOSTILE = json.dumps([{"name": "x", "command": ["sh", "-c", "id > proof.txt"]}])
DECLARED = {"files": {"name": "files", "command": ["python", "server.py"]}}


@pytest.fixture
def staff(client, db):
    """An operator: agents (their MCP servers among them) are changed by superusers only."""
    user = get_user_model().objects.create_superuser("staff", password="pw")
    client.force_login(user)
    return user


def change_form(agent, **changes) -> dict:
    form = {
        "organization": agent.organization_id,
        "name": agent.name,
        "soul": agent.soul,
        "skills": agent.skills,
        "model_name": "",
        "temperature": "",
        "memory_token_budget": agent.memory_token_budget,
    }
    return {**form, **changes}


def test_admin_cannot_set_an_mcp_command(client, staff, agent, settings):
    settings.MCP_SERVERS = DECLARED
    url = f"/admin/memory/agent/{agent.pk}/change/"
    for hostile in (HOSTILE, [HOSTILE], ["x"], ["http://10.0.0.1/mcp"]):
        response = client.post(url, change_form(agent, mcp_servers=hostile))
        assert response.status_code == 200  # the form again, with its error
        assert "Select a valid choice" in response.content.decode()
        agent.refresh_from_db()
        assert agent.mcp_servers == []


def test_admin_chooses_among_the_declared_servers(client, staff, agent, settings):
    settings.MCP_SERVERS = DECLARED
    page = client.get(f"/admin/memory/agent/{agent.pk}/change/").content.decode()
    assert 'value="files"' in page and "server.py" not in page
    response = client.post(
        f"/admin/memory/agent/{agent.pk}/change/", change_form(agent, mcp_servers=["files"])
    )
    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.mcp_servers == ["files"]


def test_the_model_refuses_definitions_and_undeclared_names(agent, settings):
    settings.MCP_SERVERS = DECLARED
    agent.mcp_servers = ["files"]
    agent.full_clean()
    for bad in (json.loads(HOSTILE), ["files", "undeclared"], "files"):
        agent.mcp_servers = bad
        with pytest.raises(ValidationError):
            agent.full_clean()


def test_servers_are_read_from_the_environment_or_a_file(monkeypatch, tmp_path):
    servers = [
        {"name": "files", "command": ["python", "server.py"]},
        {"name": "web", "url": "https://mcp.example/mcp"},
    ]
    monkeypatch.setenv("MCP", json.dumps(servers))
    assert mcp_servers_from_env("MCP", "MCP_FILE") == {s["name"]: s for s in servers}
    monkeypatch.delenv("MCP")
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(servers[:1]))
    monkeypatch.setenv("MCP_FILE", str(path))
    assert mcp_servers_from_env("MCP", "MCP_FILE") == {"files": servers[0]}
    monkeypatch.delenv("MCP_FILE")
    assert mcp_servers_from_env("MCP", "MCP_FILE") == {}


@pytest.mark.parametrize(
    "raw, reason",
    [
        ("{", "not valid JSON"),
        ('{"name": "x"}', "a JSON list"),
        ('[{"name": "x"}]', "exactly one of"),
        ('[{"name": "x", "command": "sh -c id"}]', "non-empty list of strings"),
        ('[{"name": "x", "url": "file:///etc/passwd"}]', "http:// or https://"),
        ('[{"name": "x", "url": "http://a/", "env": {}}]', "unknown field"),
        ('[{"name": "x", "url": "http://a/"}, {"name": "x", "url": "http://b/"}]', "two servers"),
    ],
)
def test_a_bad_declaration_stops_start_up_naming_the_variable(monkeypatch, raw, reason):
    monkeypatch.setenv("MCP", raw)
    with pytest.raises(ImproperlyConfigured, match=reason) as refused:
        mcp_servers_from_env("MCP", "MCP_FILE")
    assert str(refused.value).startswith("MCP")
