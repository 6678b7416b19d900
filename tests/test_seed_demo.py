from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command

from memory.models import Agent, Organization


def test_seed_demo_is_idempotent_and_the_printed_login_works(db, capsys):
    call_command("seed_demo")
    first = capsys.readouterr().out
    call_command("seed_demo")
    assert Organization.objects.filter(slug="demo").count() == 1
    assert Agent.objects.filter(name="Drift").count() == 1
    assert "Username  demo\n" in first and "Password  demo-password" in first
    user = authenticate(username="demo", password="demo-password")
    assert user is not None and user.is_staff
    assert user.organizations.filter(slug="demo").exists()


def test_the_admin_login_works_for_the_demo_user(client, db):
    call_command("seed_demo")
    assert client.login(username="demo", password="demo-password")
    response = client.get("/admin/memory/topic/")
    assert response.status_code == 200


def test_the_banner_shows_the_address_actually_served(db, capsys):
    call_command("seed_demo", host="127.0.0.1", port="8101")
    out = capsys.readouterr().out
    assert "http://127.0.0.1:8101/" in out and "http://127.0.0.1:8101/admin/" in out
    assert ":8000" not in out
    call_command("seed_demo", host="0.0.0.0", port="9000")
    assert "http://127.0.0.1:9000/" in capsys.readouterr().out


def test_a_changed_password_is_not_hidden_the_banner_gives_the_reset_command(db, capsys):
    call_command("seed_demo")
    user = get_user_model().objects.get(username="demo")
    user.set_password("something-else-entirely")
    user.save()
    capsys.readouterr()

    call_command("seed_demo")
    out = capsys.readouterr().out
    assert "demo-password" in out and "seed_demo --reset-password" in out
    assert "the password you set" not in out
    assert authenticate(username="demo", password="demo-password") is None

    call_command("seed_demo", reset_password=True)
    assert "Password  demo-password" in capsys.readouterr().out
    assert authenticate(username="demo", password="demo-password") is not None


def test_the_banner_names_the_model_and_how_to_connect_one(db, capsys, settings):
    call_command("seed_demo")
    offline = capsys.readouterr().out
    assert "Model     offline (no model connected)" in offline
    assert "OPENAI_BASE_URL" in offline and "make local-model" in offline

    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    settings.DRIFTLESS_MODEL = "qwen3-1.7b"
    call_command("seed_demo")
    assert "Model     qwen3-1.7b" in capsys.readouterr().out
