"""Admin confined to an organization: a staff member who is not a superuser sees and
changes only their organizations' rows, whatever permissions they hold (issue 20)."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token

from memory.models import Agent, ImportantInfo, Message, Notes, Organization, Session
from tests.conftest import make_user


@pytest.fixture
def other_org(db):
    """Globex: another organization, its agent, a member and her session."""
    org = Organization.objects.create(name="Globex", slug="globex")
    agent = Agent.objects.create(organization=org, name="Rival", soul="You are Rival.")
    dana = make_user("dana", org)
    session = Session.objects.start(user=dana, agent=agent, title="Globex secret plans")
    session.append_message(role="user", content="The merger closes Friday.")
    Notes.objects.create(topic=session.active_topic(), content="globex notes")
    ImportantInfo.objects.create(user=dana, agent=agent, organization=org, data={"k": "v"})
    Token.objects.create(user=dana)
    return org, agent, dana, session


@pytest.fixture
def sam(client, organization):
    """Staff of Acme (not a superuser) holding every permission of memory and auth."""
    user = make_user("sam", organization)
    user.is_staff = True
    user.save()
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label__in=["memory", "auth", "authtoken"])
    )
    client.force_login(user)
    return user


@pytest.fixture
def own_session(alice, agent):
    session = Session.objects.start(user=alice, agent=agent, title="Acme roadmap")
    session.append_message(role="user", content="Ship in March.")
    return session


def test_another_organizations_rows_are_404s(client, sam, other_org, own_session):
    org, agent, dana, session = other_org
    topic = session.active_topic()
    message = Message.objects.filter(session=session).first()
    urls = [
        f"/admin/memory/session/{session.pk}/change/",
        f"/admin/memory/session/{session.pk}/delete/",
        f"/admin/memory/session/{session.pk}/history/",
        f"/admin/memory/topic/{topic.pk}/change/",
        f"/admin/memory/message/{message.pk}/change/",
        f"/admin/memory/notes/{Notes.objects.get(topic=topic).pk}/change/",
        f"/admin/memory/importantinfo/{ImportantInfo.objects.get(user=dana).pk}/change/",
        f"/admin/memory/agent/{agent.pk}/change/",
        f"/admin/memory/organization/{org.pk}/change/",
        f"/admin/auth/user/{dana.pk}/change/",
        f"/admin/auth/user/{dana.pk}/password/",
        f"/admin/authtoken/tokenproxy/{dana.pk}/change/",
    ]
    for url in urls:
        assert client.get(url).status_code == 404, url
    assert client.post(f"/admin/memory/agent/{agent.pk}/change/", {"soul": "x"}).status_code in (
        403,
        404,
    )
    own = own_session.active_topic()
    assert client.get(f"/admin/memory/topic/{own.pk}/change/").status_code == 200


def test_lists_show_only_their_organizations_rows(client, sam, other_org, own_session):
    for url in [
        "/admin/memory/session/",
        "/admin/memory/topic/",
        "/admin/memory/message/",
        "/admin/memory/notes/",
        "/admin/memory/importantinfo/",
        "/admin/memory/agent/",
        "/admin/memory/organization/",
        "/admin/auth/user/",
        "/admin/authtoken/tokenproxy/",
    ]:
        page = client.get(url).content.decode()
        for secret in ("Globex", "Rival", "dana", "merger", Token.objects.get().key):
            assert secret not in page, (url, secret)
    sessions = client.get("/admin/memory/session/").content.decode()
    assert "Acme roadmap" in sessions


def test_staff_cannot_change_agents_or_membership(client, sam, organization, agent):
    response = client.post(
        f"/admin/memory/agent/{agent.pk}/change/",
        {"organization": organization.pk, "name": "Drift", "soul": "Obey sam.", "skills": ""},
    )
    assert response.status_code == 403
    agent.refresh_from_db()
    assert agent.soul == "You are Drift."
    other = Organization.objects.create(name="Initech", slug="initech")
    response = client.post(
        f"/admin/memory/organization/{other.pk}/change/",
        {"name": "Initech", "slug": "initech", "members": [sam.pk]},
    )
    assert response.status_code == 404
    assert not other.members.filter(pk=sam.pk).exists()
    response = client.post(
        f"/admin/memory/organization/{organization.pk}/change/",
        {"name": "Acme", "slug": "acme", "members": [sam.pk]},
    )
    assert response.status_code == 403
    assert client.get("/admin/memory/organization/add/").status_code == 403
    assert client.get(f"/admin/memory/agent/{agent.pk}/change/").status_code == 200  # to read


def test_staff_holding_change_user_cannot_make_themselves_superuser(client, sam):
    page = client.get(f"/admin/auth/user/{sam.pk}/change/")
    assert page.status_code == 200
    client.post(
        f"/admin/auth/user/{sam.pk}/change/",
        {
            "username": "sam",
            "is_active": "on",
            "is_staff": "on",
            "is_superuser": "on",
            "groups": [],
            "user_permissions": [p.pk for p in Permission.objects.all()],
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )
    sam.refresh_from_db()
    assert not sam.is_superuser
    assert not sam.user_permissions.filter(content_type__app_label="admin").exists()
    assert client.get("/admin/auth/group/add/").status_code == 403


def test_another_staff_member_of_the_same_organization_is_out_of_reach(client, sam, organization):
    peer = make_user("pat", organization)
    peer.is_staff = True
    peer.save()
    assert client.get(f"/admin/auth/user/{peer.pk}/change/").status_code == 404
    member = make_user("quinn", organization)
    assert client.get(f"/admin/auth/user/{member.pk}/change/").status_code == 200


def test_a_superuser_still_sees_every_organization(client, other_org):
    superuser = get_user_model().objects.create_superuser("root", "r@example.com", "pw")
    client.force_login(superuser)
    assert "Globex secret plans" in client.get("/admin/memory/session/").content.decode()
    agent = other_org[1]
    assert client.get(f"/admin/memory/agent/{agent.pk}/change/").status_code == 200


def test_every_admin_of_the_memory_app_is_confined_to_organizations():
    """A model admin added later (consolidation runs were one) is scoped like the rest."""
    from django.contrib import admin

    from memory.admin.scope import OrganizationScoped

    unscoped = [
        model._meta.label
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label == "memory"
        and not isinstance(model_admin, OrganizationScoped)
        # the deployment's own rows (model endpoints): superusers only, staff never see them
        and not getattr(model_admin, "superusers_only", False)
    ]
    assert unscoped == []


# Issue 45, item 7: operators held to Django's permissions and to their organizations.


def test_staff_cannot_set_the_password_of_a_member_shared_with_another_organization(
    client, sam, organization, other_org
):
    org, _agent, _dana, _session = other_org
    carol = make_user("carol", organization)
    org.members.add(carol)  # in Acme and in Globex; sam administers only Acme

    page = client.get(f"/admin/auth/user/{carol.pk}/password/")
    client.post(
        f"/admin/auth/user/{carol.pk}/password/",
        {"password1": "taken-over-42!", "password2": "taken-over-42!", "usable_password": "true"},
    )
    change = client.post(
        f"/admin/auth/user/{carol.pk}/change/",
        {"username": "carol-renamed", "is_active": "on", "date_joined_0": "2026-01-01",
         "date_joined_1": "00:00:00"},
    )  # fmt: skip

    assert page.status_code == 403 and change.status_code == 403
    carol.refresh_from_db()
    assert carol.check_password("pw-carol") and carol.username == "carol"


def test_staff_still_set_the_password_of_a_member_of_their_organizations_only(
    client, sam, organization
):
    erin = make_user("erin", organization)
    response = client.post(
        f"/admin/auth/user/{erin.pk}/password/",
        {"password1": "a-new-pass-42!", "password2": "a-new-pass-42!", "usable_password": "true"},
    )
    assert response.status_code == 302
    erin.refresh_from_db()
    assert erin.check_password("a-new-pass-42!")


@pytest.fixture
def viewer(client, organization):
    """Staff of Acme holding only the view permissions."""
    user = make_user("vera", organization)
    user.is_staff = True
    user.save()
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="memory", codename__startswith="view_")
    )
    client.force_login(user)
    return user


def _action(client, model: str, action: str, pk: int):
    return client.post(
        f"/admin/memory/{model}/", {"action": action, "_selected_action": [pk], "index": 0}
    )


def test_a_view_only_operator_cannot_undo_start_or_export(
    client, viewer, alice, agent, own_session
):
    from memory.models import ConsolidationRun

    run = ConsolidationRun.objects.create(
        agent=agent, user=alice, organization=agent.organization,
        status=ConsolidationRun.Status.APPLIED,
    )  # fmt: skip
    runs = ConsolidationRun.objects.count()

    undo = _action(client, "consolidationrun", "undo_runs", run.pk)
    start = _action(client, "consolidationrun", "consolidate_scopes", run.pk)
    start_from_sessions = _action(client, "session", "consolidate_scopes", own_session.pk)
    export = _action(client, "session", "export_scope_memory", own_session.pk)

    run.refresh_from_db()
    assert run.undone_at is None and ConsolidationRun.objects.count() == runs
    for response in (undo, start, start_from_sessions, export):
        assert "attachment" not in response.get("Content-Disposition", "")
    assert b"Ship in March." not in export.content


def test_an_operator_with_change_permissions_can_export(client, sam, own_session):
    export = _action(client, "session", "export_scope_memory", own_session.pk)
    assert "attachment" in export["Content-Disposition"]
