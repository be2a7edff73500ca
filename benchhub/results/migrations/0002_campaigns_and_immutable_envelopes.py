"""The campaigns from their definitions; and on PostgreSQL the database itself refuses to change or
delete a stored envelope, so no code path (admin, shell, a bug) can rewrite what a contributor signed."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION results_rawenvelope_immutable() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'raw envelopes are immutable';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER results_rawenvelope_immutable BEFORE UPDATE OR DELETE ON results_rawenvelope
    FOR EACH ROW EXECUTE FUNCTION results_rawenvelope_immutable();
"""
DROP = """
DROP TRIGGER IF EXISTS results_rawenvelope_immutable ON results_rawenvelope;
DROP FUNCTION IF EXISTS results_rawenvelope_immutable();
"""


def sync(apps, schema_editor):
    """Campaign rows now come with their versions (0005_campaign_versions), which need that table."""


def create_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("results", "0001_initial")]

    operations = [
        migrations.RunPython(sync, migrations.RunPython.noop),
        migrations.RunPython(create_trigger, drop_trigger),
    ]
