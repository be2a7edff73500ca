from django.db import migrations, models


def sync(apps, schema_editor):
    # A database made before few-row-mma shipped gets its campaign row here, as a new one does in 0002.
    from benchhub.results.campaigns import sync_campaigns

    sync_campaigns(apps.get_model("results", "Campaign"))


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0005_submission_payload_sha256_unique"),
    ]

    operations = [
        migrations.AlterField(
            model_name="measurement",
            name="excluded_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("", "included"),
                    ("correctness_failed", "Correctness Failed"),
                    ("degenerate_output", "Degenerate Output"),
                    ("hidden", "Hidden"),
                    ("nonstandard_sweep", "Nonstandard Sweep"),
                ],
                default="",
                max_length=32,
            ),
        ),
        migrations.RunPython(sync, migrations.RunPython.noop),
    ]
