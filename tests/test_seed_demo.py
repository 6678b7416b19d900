from django.contrib.auth import authenticate
from django.core.management import call_command

from memory.models import Agent, Organization


def test_seed_demo_is_idempotent_and_the_printed_login_works(db, capsys):
    call_command("seed_demo")
    first = capsys.readouterr().out
    call_command("seed_demo")
    assert Organization.objects.filter(slug="demo").count() == 1
    assert Agent.objects.filter(name="Drift").count() == 1
    assert "'demo'" in first and "'demo-password'" in first
    user = authenticate(username="demo", password="demo-password")
    assert user is not None and user.is_staff
    assert user.organizations.filter(slug="demo").exists()


def test_the_admin_login_works_for_the_demo_user(client, db):
    call_command("seed_demo")
    assert client.login(username="demo", password="demo-password")
    response = client.get("/admin/memory/topic/")
    assert response.status_code == 200
