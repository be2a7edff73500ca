# The single-column indexes of three foreign keys whose column already leads another index
# (measurement_unique, measurement_cell_covering, variant_name_unique): dropped CONCURRENTLY, the
# constraints left as they are (see AlterForeignKeyIndex).

import django.db.models.deletion
from django.db import migrations, models

from benchhub.results.migration_operations import AlterForeignKeyIndex


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('results', '0009_submission_cell_group'),
    ]

    operations = [
        AlterForeignKeyIndex(
            model_name='measurement',
            name='campaign',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='results.campaign'),
        ),
        AlterForeignKeyIndex(
            model_name='measurement',
            name='submission',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='measurements', to='results.submission'),
        ),
        AlterForeignKeyIndex(
            model_name='submissionvariant',
            name='submission',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='variants', to='results.submission'),
        ),
    ]
