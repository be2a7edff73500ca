# Two indexes of results_submission that no query needs, dropped CONCURRENTLY (ingest goes on):
# - key_id's own index: submission_key_nonce_unique leads with key_id (see AlterForeignKeyIndex);
# - the varchar_pattern_ops copy of the payload hash's unique index, which Django adds for LIKE on a
#   unique CharField: hashes are only ever compared whole. The unique constraint itself stays, renamed
#   to what the model now declares (a metadata change); on SQLite the column keeps its UNIQUE.

import django.db.models.deletion
from django.db import migrations, models

from benchhub.results.migration_operations import AlterForeignKeyIndex, RunSQLOnPostgreSQL

TABLE = "results_submission"
LIKE_INDEX = "results_submission_payload_sha256_f027695a_like"
DJANGO_UNIQUE = "results_submission_payload_sha256_f027695a_uniq"
UNIQUE = "submission_payload_unique"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("accounts", "0001_initial"),
        ("results", "0012_cell_revision"),
    ]

    operations = [
        AlterForeignKeyIndex(
            model_name="submission",
            name="key",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="submissions",
                to="accounts.publickey",
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="submission", name="payload_sha256", field=models.CharField(max_length=64)
                ),
                migrations.AddConstraint(
                    model_name="submission",
                    constraint=models.UniqueConstraint(fields=("payload_sha256",), name=UNIQUE),
                ),
            ],
            database_operations=[
                RunSQLOnPostgreSQL(
                    f"DROP INDEX CONCURRENTLY IF EXISTS {LIKE_INDEX}",
                    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {LIKE_INDEX} ON {TABLE} (payload_sha256 varchar_pattern_ops)",
                ),
                RunSQLOnPostgreSQL(
                    f"ALTER TABLE {TABLE} RENAME CONSTRAINT {DJANGO_UNIQUE} TO {UNIQUE}",
                    f"ALTER TABLE {TABLE} RENAME CONSTRAINT {UNIQUE} TO {DJANGO_UNIQUE}",
                ),
            ],
        ),
    ]
