# The reference rows' own index on the campaign (and its LIKE twin) repeated the start of their unique
# constraint and of the (campaign_slug, chip) index: dropped.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("web", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="referencerow",
            name="campaign_slug",
            field=models.SlugField(db_index=False, max_length=64),
        ),
    ]
