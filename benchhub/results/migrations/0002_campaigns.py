from django.db import migrations


def sync(apps, schema_editor):
    from benchhub.results.campaigns import sync_campaigns

    sync_campaigns(apps.get_model("results", "Campaign"))


class Migration(migrations.Migration):
    dependencies = [("results", "0001_initial")]

    operations = [migrations.RunPython(sync, migrations.RunPython.noop)]
