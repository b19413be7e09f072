"""The moved models keep their permissions and admin history: their content types follow them from
the repos app to this one (a fresh database has none to move)."""
from django.db import migrations

MOVED = ["blob", "blobproof", "uploadsession"]


def forwards(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not ContentType.objects.filter(app_label="content", model=model).exists():
            ContentType.objects.filter(app_label="repos", model=model).update(app_label="content")


def backwards(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not ContentType.objects.filter(app_label="repos", model=model).exists():
            ContentType.objects.filter(app_label="content", model=model).update(app_label="repos")


class Migration(migrations.Migration):

    dependencies = [
        ("content", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
