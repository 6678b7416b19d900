from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0008_fact_provenance"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="stopped",
            field=models.BooleanField(
                default=False, help_text="A reply the user stopped: what had streamed until then."
            ),
        ),
    ]
