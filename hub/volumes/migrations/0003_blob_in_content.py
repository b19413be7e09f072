"""VolumeEntry.blob points at hub.content's Blob (the same table as before): state only."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('content', '0001_initial'),
        ('volumes', '0002_root_set_null'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
                migrations.AlterField(
                    model_name='volumeentry',
                    name='blob',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='volume_entries', to='content.blob'),
                ),
        ]),
    ]
