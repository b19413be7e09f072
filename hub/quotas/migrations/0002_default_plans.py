from django.db import migrations

PLANS = [
    ("free", None, "Free: the server default (HUB_DEFAULT_QUOTA, 50 GB unless set)", True),
    ("pro", 500 * 10**9, "Pro: 500 GB", False),
    ("team", 2 * 10**12, "Team: 2 TB", False),
]


def create_plans(apps, schema_editor):
    Plan = apps.get_model("quotas", "Plan")
    for name, quota, description, default in PLANS:
        Plan.objects.get_or_create(name=name, defaults={"quota_bytes": quota, "description": description,
                                                        "is_default": default})


class Migration(migrations.Migration):
    dependencies = [("quotas", "0001_initial")]
    operations = [migrations.RunPython(create_plans, migrations.RunPython.noop)]
