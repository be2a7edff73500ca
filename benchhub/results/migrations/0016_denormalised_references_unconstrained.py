# A measurement's campaign, contributor and cell number are copies kept for the refresh and the
# lists; the submission's own references (PROTECT) keep what they name. Their constraints cost every
# ingest a check per row at commit and a share lock that rewrote the page of each cell's key
# (docs/performance.md, section 1): dropped, which takes a brief exclusive lock on each table. The
# indexes of the cell keys and the cells on the campaign alone repeated the start of their unique
# constraints (and misled the planner into reading every cell key of the campaign); dropped too.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("results", "0015_cell_bands"),
    ]

    operations = [
        migrations.AlterField(
            model_name="cellkey",
            name="campaign",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="results.campaign"
            ),
        ),
        migrations.AlterField(
            model_name="leaderboardcell",
            name="campaign",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="cells", to="results.campaign"
            ),
        ),
        migrations.AlterField(
            model_name="measurement",
            name="campaign",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="results.campaign",
            ),
        ),
        migrations.AlterField(
            model_name="measurement",
            name="cell_key",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="results.cellkey",
            ),
        ),
        migrations.AlterField(
            model_name="measurement",
            name="contributor",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="accounts.contributor",
            ),
        ),
    ]
