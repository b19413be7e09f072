"""Blob, BlobProof and UploadSession move from the repos app to the content app. Their tables keep
the names the repos app gave them, so this changes Django's idea of where the models live and
nothing in the database."""

import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('quotas', '0002_default_plans'),
        ('repos', '0011_ref_kind_pr'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
                migrations.CreateModel(
                    name='Blob',
                    fields=[
                        ('sha256', models.CharField(max_length=64, primary_key=True, serialize=False)),
                        ('size', models.BigIntegerField()),
                        ('verified', models.BooleanField(default=False, help_text='sha256 checked against the stored bytes')),
                        ('key', models.CharField(blank=True, max_length=300)),
                        ('created', models.DateTimeField(auto_now_add=True)),
                        ('touched', models.DateTimeField(blank=True, null=True)),
                        ('checked_at', models.DateTimeField(blank=True, null=True)),
                        ('corrupt_at', models.DateTimeField(blank=True, db_index=True, null=True)),
                        ('corrupt_reason', models.CharField(blank=True, max_length=300)),
                    ],
                    options={
                        'db_table': 'repos_blob',
                    },
                ),
                migrations.CreateModel(
                    name='UploadSession',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, primary_key=True, serialize=False)),
                        ('sha256', models.CharField(max_length=64)),
                        ('size', models.BigIntegerField()),
                        ('part_size', models.BigIntegerField()),
                        ('store_upload_id', models.CharField(blank=True, max_length=1024)),
                        ('key', models.CharField(max_length=300)),
                        ('state', models.CharField(default='open', max_length=8)),
                        ('purpose', models.CharField(default='lfs', max_length=16)),
                        ('target', models.JSONField(blank=True, default=dict)),
                        ('created', models.DateTimeField(auto_now_add=True)),
                        ('expires', models.DateTimeField()),
                        ('lease', models.CharField(blank=True, default='', max_length=32)),
                        ('claimed', models.DateTimeField(blank=True, null=True)),
                        ('repo', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, to='repos.repo')),
                        ('reservation', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='quotas.reservation')),
                        ('user', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'repos_uploadsession',
                    },
                ),
                migrations.CreateModel(
                    name='BlobProof',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('created', models.DateTimeField(auto_now_add=True)),
                        ('blob', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='proofs', to='content.blob')),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'repos_blobproof',
                        'constraints': [models.UniqueConstraint(fields=('user', 'blob'), name='blobproof_unique')],
                    },
                ),
        ]),
    ]
