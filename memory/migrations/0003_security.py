# Operators configure MCP servers, staff choose: an agent keeps only the *names* of its
# servers. A definition stored before (a command or a URL typed in the admin) is reduced
# to its name, so it runs only if the operator declares a server of that name in
# DRIFTLESS_MCP_SERVERS; anything without a name is dropped. Reversing keeps the names.

import logging

from django.db import migrations, models

import memory.models

logger = logging.getLogger(__name__)


def keep_only_names(apps, schema_editor):
    Agent = apps.get_model("memory", "Agent")
    for agent in Agent.objects.all():
        entries = agent.mcp_servers if isinstance(agent.mcp_servers, list) else []
        names = []
        for entry in entries:
            name = entry.get("name") if isinstance(entry, dict) else entry
            if isinstance(name, str) and name.strip() and name.strip() not in names:
                names.append(name.strip())
        if names != agent.mcp_servers:
            logger.warning(
                "agent %s: MCP server definitions reduced to the names %s; declare them in "
                "DRIFTLESS_MCP_SERVERS to keep using them",
                agent.pk,
                names,
            )
            agent.mcp_servers = names
            agent.save(update_fields=["mcp_servers"])


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0002_search_portable_ids"),
    ]

    operations = [
        migrations.AlterField(
            model_name="agent",
            name="mcp_servers",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Names of the MCP servers this agent uses, from those the operator "
                "declares in the deployment configuration (DRIFTLESS_MCP_SERVERS).",
                validators=[memory.models.validate_mcp_server_names],
            ),
        ),
        migrations.RunPython(keep_only_names, migrations.RunPython.noop),
    ]
