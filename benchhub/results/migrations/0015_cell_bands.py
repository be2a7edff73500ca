# The incremental refresh finds its neighbours in bands around each cell's tracked ranks (CellBand)
# instead of in three value-ordered indexes of every included measurement, each of which took a
# submission's 27 entries at 27 random places (docs/performance.md, section 2); the contributor
# lookup's index is led by the contributor, so a submission's entries there fall together. Every
# cell's band starts unknown (null): its group's next refresh reads it in full and writes one.
# Indexes are built and dropped CONCURRENTLY: ingest and refreshes go on meanwhile.

import django.db.models.deletion
from django.db import migrations, models

from benchhub.results.migration_operations import (
    AddIndexConcurrentlyOnPostgreSQL,
    RemoveIndexConcurrentlyOnPostgreSQL,
)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("results", "0014_measurement_cell_key_covering"),
    ]

    operations = [
        migrations.CreateModel(
            name="CellBand",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "cell_key",
                        "column_number",
                        "value",
                        "submission",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                (
                    "cell_key",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="results.cellkey",
                    ),
                ),
                ("column_number", models.PositiveSmallIntegerField(help_text="the column's place in stats.COLUMNS")),
                ("value", models.FloatField()),
                (
                    "submission",
                    models.UUIDField(help_text="the element's tie-breaking key: the submission of its row"),
                ),
            ],
        ),
        migrations.AddField(
            model_name="leaderboardcell",
            name="order_band",
            field=models.JSONField(
                editable=False,
                help_text="Per column, [below, above, lo, hi] of its band in CellBand (stats.Band): where an "
                "incremental refresh finds the tracked elements' neighbours. Null: unknown, the next refresh reads "
                "the whole cell.",
                null=True,
            ),
        ),
        AddIndexConcurrentlyOnPostgreSQL(
            model_name="measurement",
            index=models.Index(
                condition=models.Q(
                    ("baseline_tg_tps__isnull", False), ("excluded_reason", ""), ("speedup__isnull", False)
                ),
                fields=["contributor", "cell_key"],
                include=("submission",),
                name="measurement_contributor_cell",
            ),
        ),
        RemoveIndexConcurrentlyOnPostgreSQL(model_name="measurement", name="measurement_cell_contributor"),
        RemoveIndexConcurrentlyOnPostgreSQL(model_name="measurement", name="measurement_order_tg"),
        RemoveIndexConcurrentlyOnPostgreSQL(model_name="measurement", name="measurement_order_baseline"),
        RemoveIndexConcurrentlyOnPostgreSQL(model_name="measurement", name="measurement_order_speedup"),
    ]
