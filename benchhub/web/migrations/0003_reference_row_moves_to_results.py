# The published reference rows' model now lives in results (results/migrations/0009): removed from
# this app's state only; the table, web_referencerow, is results' now. After accounts' 0003, which
# reads the rows as web's.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("web", "0002_reference_row_campaign_slug_unindexed"),
        ("results", "0009_reference_row_moves_here"),
        ("accounts", "0003_names_networks_retire"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ReferenceRow")],
            database_operations=[],
        ),
    ]
