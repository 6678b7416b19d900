from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0010_consolidation"),
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
