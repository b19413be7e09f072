"""Blob.remote: bytes an upstream holds, fetched into the store on their first read; Blob.upstream:
bytes that may be evicted again once fetched (issue 23)."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("content", "0002_content_types"),
    ]

    operations = [
        migrations.AddField(
            model_name="blob",
            name="remote",
            field=models.BooleanField(default=False, help_text="bytes at an upstream, fetched on first read"),
        ),
        migrations.AddField(
            model_name="blob",
            name="upstream",
            field=models.BooleanField(default=False, help_text="an upstream holds them too (evictable)"),
        ),
    ]
