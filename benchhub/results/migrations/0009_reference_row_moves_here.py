# Published reference rows move from the web app to results (results/published.py), so that the API
# and the pages both read them from the domain and neither imports the other. The table stays as it
# is: only Django's state moves (web's 0003 removes the model from the web app's state).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0008_cells_v4"),
        ("web", "0002_reference_row_campaign_slug_unindexed"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ReferenceRow",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("campaign_slug", models.SlugField(db_index=False, max_length=64)),
                        ("chip", models.CharField(max_length=100)),
                        ("gpu_cores", models.PositiveIntegerField(blank=True, null=True)),
                        ("machine_label", models.CharField(max_length=100)),
                        ("model_label", models.CharField(max_length=200)),
                        ("quant", models.CharField(max_length=32)),
                        ("baseline_variant", models.CharField(max_length=64)),
                        ("variant", models.CharField(max_length=64)),
                        ("batch_size", models.PositiveIntegerField()),
                        ("baseline_tg_tps", models.FloatField()),
                        ("tg_tps", models.FloatField()),
                        ("source", models.CharField(max_length=200)),
                        ("source_url", models.URLField(blank=True)),
                        ("method", models.TextField(blank=True)),
                    ],
                    options={
                        "db_table": "web_referencerow",
                        "ordering": ("campaign_slug", "chip", "model_label", "variant", "batch_size"),
                        "indexes": [models.Index(fields=["campaign_slug", "chip"], name="web_referen_campaig_a2636a_idx")],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("campaign_slug", "machine_label", "model_label", "variant", "batch_size"),
                                name="reference_row_unique_measurement",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("baseline_tg_tps__gt", 0), ("tg_tps__gt", 0)),
                                name="reference_row_positive_throughput",
                            ),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
