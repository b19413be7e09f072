"""The repos app lets go of Blob, BlobProof and UploadSession (now hub.content's; same tables): state
only, nothing in the database changes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('content', '0001_initial'),
        ('repos', '0011_ref_kind_pr'),
        ('volumes', '0003_blob_in_content'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
                migrations.RemoveField(
                    model_name='blobproof',
                    name='blob',
                ),
                migrations.AlterField(
                    model_name='repoblob',
                    name='blob',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='repo_refs', to='content.blob'),
                ),
                migrations.RemoveField(
                    model_name='blobproof',
                    name='user',
                ),
                migrations.RemoveField(
                    model_name='uploadsession',
                    name='repo',
                ),
                migrations.RemoveField(
                    model_name='uploadsession',
                    name='reservation',
                ),
                migrations.RemoveField(
                    model_name='uploadsession',
                    name='user',
                ),
                migrations.DeleteModel(
                    name='Blob',
                ),
                migrations.DeleteModel(
                    name='BlobProof',
                ),
                migrations.DeleteModel(
                    name='UploadSession',
                ),
        ]),
    ]
