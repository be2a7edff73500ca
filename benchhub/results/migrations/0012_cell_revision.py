from django.db import migrations, models

from benchhub.results.migration_operations import RunSQLOnPostgreSQL

# A refresh rewrites a group's ~27 cells (about 750 bytes each, ~10 to a page) in place: with pages
# half empty, each page's new versions fit beside the old ones, so every rewrite is a HOT update and
# the old versions are pruned at the next visit. Pages filled before this keep no room: their rows
# move once, to pages filled to half, and stay there.
HALF_FULL_PAGES = "ALTER TABLE results_leaderboardcell SET (fillfactor = 50)"
FULL_PAGES = "ALTER TABLE results_leaderboardcell RESET (fillfactor)"


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0011_cell_key"),
    ]

    operations = [
        migrations.AddField(
            model_name="leaderboardcell",
            name="revision",
            field=models.PositiveBigIntegerField(
                default=0, editable=False, help_text="Raised by one each time a refresh rewrites the cell in place."
            ),
        ),
        RunSQLOnPostgreSQL(HALF_FULL_PAGES, FULL_PAGES),
    ]
