"""schemathesis against the OpenAPI schema of /agents-api/, on a real server: every
operation, with a token, gets generated input (valid and invalid, NUL and surrogates
included) and must never answer 5xx.

The ids in paths are those of real rows, so request bodies reach the code that reads
them (a random id would stop at the 404). The number of examples per operation is capped
so the run stays within a couple of minutes; `-m fuzz` runs it alone.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from memory.stores.facts import set_fact
from memory.stores.notes import append_notes
from tests.live_server import running_server

pytestmark = [
    pytest.mark.fuzz,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]

EXAMPLES_PER_OPERATION = 20
STORING_EXAMPLES = 100
RUN_SECONDS = 600

CONFIG = """
[generation]
max-examples = {examples}
mode = "all"

[phases.stateful]
enabled = false

[parameters]
"path.session_id" = {session_id}
"path.topic_id" = {topic_id}

# The operations that store what they are sent get more cases.
[[operations]]
include-method = ["PUT", "POST"]
include-path-regex = '/(facts/.key.|messages|sessions/)$'
generation.max-examples = {storing_examples}
"""


def test_no_operation_answers_5xx_for_any_generated_input(alice, agent, session, tmp_path):
    token = Token.objects.create(user=alice).key
    topic = session.active_topic()
    set_fact(user=alice, agent=agent, key="tea", value="green", actor="user")
    append_notes(topic=topic, text="decided: green tea")
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        CONFIG.format(
            examples=EXAMPLES_PER_OPERATION,
            storing_examples=STORING_EXAMPLES,
            session_id=session.pk,
            topic_id=topic.pk,
        )
    )
    cli = Path(sys.executable).parent / "schemathesis"
    # Throttling would answer 429 to most of the run; the fuzz is about what lies behind.
    with running_server(extra_env={"API_THROTTLE_USER": "100000/minute"}) as url:
        run = subprocess.run(
            [str(cli), "--config-file", str(config), "run", f"{url}/agents-api/schema/"]
            + ["--url", url, "--header", f"Authorization: Token {token}"]
            + ["--checks", "not_a_server_error", "--workers", "1", "--seed", "1"]
            + ["--request-timeout", "30", "--no-color"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
        )
    report = run.stdout[-6000:] + run.stderr[-2000:]
    assert run.returncode == 0, report
    # Every operation of the schema was exercised, and every generated case passed.
    assert re.search(r"Selected: (\d+)/\1\s+Tested: \1\b", run.stdout), report
    cases = re.search(r"(\d+) generated, \1 passed", run.stdout)
    assert cases and int(cases.group(1)) >= 10 * EXAMPLES_PER_OPERATION, report
