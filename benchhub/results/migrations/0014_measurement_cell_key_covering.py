# The index that covers a full read of a group's cells, keyed by the cell's number instead of the
# six columns naming the cell, and covering the submission too (its id is each value's
# tie-breaking key, which the old index left to a heap fetch per row). Built CONCURRENTLY before
# the old one is dropped CONCURRENTLY: ingest and refreshes go on meanwhile.

from django.db import migrations, models

from benchhub.results.migration_operations import (
    AddIndexConcurrentlyOnPostgreSQL,
    RemoveIndexConcurrentlyOnPostgreSQL,
)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("results", "0013_drop_indexes_no_lookup_uses"),
    ]

    operations = [
        AddIndexConcurrentlyOnPostgreSQL(
            model_name="measurement",
            index=models.Index(
                fields=["cell_key"],
                include=("submission", "tg_tps", "baseline_tg_tps", "speedup", "contributor", "excluded_reason"),
                name="measurement_cell_key_covering",
            ),
        ),
        RemoveIndexConcurrentlyOnPostgreSQL(model_name="measurement", name="measurement_cell_covering"),
    ]
