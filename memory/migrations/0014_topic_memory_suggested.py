from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0013_topic_consolidated_through_seq"),
    ]

    operations = [
        migrations.AddField(
            model_name="topic",
            name="memory_suggested",
            field=models.BooleanField(
                default=False,
                help_text="Its summary asked to promote it, but it holds results of tools from "
                "outside: it waits for the user to promote it (the brain icon).",
            ),
        ),
    ]
