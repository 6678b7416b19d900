"""POST /agents-api/sessions/<id>/evaluate: 202 at once for the owner, 404 for anyone else."""

import time

import pytest
from rest_framework.test import APIClient

from driftless.celery import app
from tests.evaluation_helpers import (
    SUBJECT_A,
    celery_eager,
    converse,
    join_background_evaluations,
)


def url(session_id: int) -> str:
    return f"/agents-api/sessions/{session_id}/evaluate"


def client_for(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def enqueued(monkeypatch):
    """Full mode: capture what would go to the broker."""
    sent = []
    monkeypatch.setattr(
        app,
        "send_task",
        lambda name, args, countdown, **options: sent.append((args[0], args[1], countdown)),
    )
    with celery_eager(False):
        yield sent


def test_the_owner_gets_202_and_a_debounced_evaluation_is_scheduled(
    session, alice, enqueued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(alice).post(url(session.pk))

    assert response.status_code == 202
    assert response.json() == {"session": session.pk, "status": "scheduled"}
    assert enqueued == [(session.pk, "exit", 2.0)]


@pytest.mark.parametrize("stranger", ["bob", "charlie"])
def test_anyone_elses_session_is_a_404_and_schedules_nothing(
    request, session, stranger, enqueued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(request.getfixturevalue(stranger)).post(url(session.pk))

    assert response.status_code == 404
    assert enqueued == []


def test_an_unknown_session_is_a_404(alice, enqueued):
    assert client_for(alice).post(url(987654)).status_code == 404


def test_an_anonymous_caller_is_refused(session, enqueued):
    assert client_for().post(url(session.pk)).status_code in (401, 403)
    assert enqueued == []


def test_only_post_is_allowed(session, alice):
    assert client_for(alice).get(url(session.pk)).status_code == 405


def test_the_owner_gets_202_when_the_broker_is_down(
    session, alice, monkeypatch, django_capture_on_commit_callbacks
):
    def broker_down(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(app, "send_task", broker_down)
    with celery_eager(False), django_capture_on_commit_callbacks(execute=True):
        response = client_for(alice).post(url(session.pk))

    assert response.status_code == 202


@pytest.mark.django_db(transaction=True)
def test_it_answers_at_once_while_a_slow_model_works_in_the_background(fake_openai, session, alice):
    """Embedded mode: the evaluation runs in a timer thread, never in the request."""
    converse(session, SUBJECT_A)
    fake_openai.hang(1.5)

    started = time.monotonic()
    response = client_for(alice).post(url(session.pk))
    elapsed = time.monotonic() - started

    assert response.status_code == 202
    assert elapsed < 1.0
    time.sleep(2.2)
    join_background_evaluations(timeout=15)
    assert fake_openai.requests  # the evaluation did run, later
