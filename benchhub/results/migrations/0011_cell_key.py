# Measurements carry a number for their cell (CellKey), and the refresh's four partial indexes
# lead with it instead of the six columns naming the cell: about half their size, and half the
# pages each ingest dirties in them (docs/performance.md, section 2). Submissions are numbered in
# the order they arrive (time_ordered_uuid): no database change, new rows only.
#
# The column is added without its constraint, filled by one UPDATE, and constrained afterwards:
# one validating scan instead of a queued check per updated row. The UPDATE rewrites every
# measurement (27 per submission): at 100,000 submissions it took the time docs/performance.md
# gives, and it holds the measurement table's rows locked while it runs.

import django.db.models.deletion
from django.db import migrations, models

import benchhub.results.models

INCLUDED = models.Q(("baseline_tg_tps__isnull", False), ("excluded_reason", ""), ("speedup__isnull", False))

NUMBER_EVERY_CELL = """
    INSERT INTO results_cellkey (campaign_id, chip, gpu_cores, quant, variant, batch_size)
    SELECT DISTINCT campaign_id, chip, gpu_cores, quant, variant_name, batch_size FROM results_measurement
    WHERE true ON CONFLICT DO NOTHING
"""
NUMBER_EVERY_MEASUREMENT = """
    UPDATE results_measurement SET cell_key_id = k.id FROM results_cellkey k
    WHERE k.campaign_id = results_measurement.campaign_id AND k.chip = results_measurement.chip
      AND COALESCE(k.gpu_cores, -1) = COALESCE(results_measurement.gpu_cores, -1)
      AND k.quant = results_measurement.quant AND k.variant = results_measurement.variant_name
      AND k.batch_size = results_measurement.batch_size
"""


def _order_index(column: str, short: str, leading: list[str]) -> models.Index:
    return models.Index(
        condition=INCLUDED, fields=[*leading, column, "submission"], name=f"measurement_order_{short}"
    )


def _contributor_index(leading: list[str]) -> models.Index:
    return models.Index(
        condition=INCLUDED, fields=[*leading, "contributor"], include=("submission",), name="measurement_cell_contributor"
    )


ORDERED = (("tg_tps", "tg"), ("baseline_tg_tps", "baseline"), ("speedup", "speedup"))


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0010_drop_indexes_covered_by_others"),
    ]

    operations = [
        migrations.AlterField(
            model_name="submission",
            name="id",
            field=models.UUIDField(
                default=benchhub.results.models.time_ordered_uuid, editable=False, primary_key=True, serialize=False
            ),
        ),
        migrations.CreateModel(
            name="CellKey",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("chip", models.CharField(max_length=200)),
                ("gpu_cores", models.PositiveIntegerField(null=True)),
                ("quant", models.CharField(max_length=32)),
                ("variant", models.CharField(max_length=64)),
                ("batch_size", models.PositiveIntegerField()),
                (
                    "campaign",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="results.campaign"
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        models.F("campaign"),
                        models.F("chip"),
                        models.functions.Coalesce("gpu_cores", -1),
                        models.F("quant"),
                        models.F("variant"),
                        models.F("batch_size"),
                        name="cell_key_unique",
                    )
                ],
            },
        ),
        migrations.AddField(
            model_name="measurement",
            name="cell_key",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="results.cellkey",
            ),
        ),
        migrations.RunSQL(NUMBER_EVERY_CELL, migrations.RunSQL.noop),
        migrations.RunSQL(NUMBER_EVERY_MEASUREMENT, migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="measurement",
            name="cell_key",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="results.cellkey"
            ),
        ),
        *(migrations.RemoveIndex(model_name="measurement", name=f"measurement_order_{short}") for _, short in ORDERED),
        migrations.RemoveIndex(model_name="measurement", name="measurement_cell_contributor"),
        *(
            migrations.AddIndex(model_name="measurement", index=_order_index(column, short, ["cell_key"]))
            for column, short in ORDERED
        ),
        migrations.AddIndex(model_name="measurement", index=_contributor_index(["cell_key"])),
    ]
