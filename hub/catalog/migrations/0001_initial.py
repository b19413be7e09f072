import django.contrib.postgres.search
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('repos', '0002_upload_purpose'),
    ]

    operations = [
        migrations.CreateModel(
            name='CatalogEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('upstream_id', models.CharField(blank=True, help_text='Hugging Face id; empty for local samples', max_length=200)),
                ('title', models.CharField(max_length=200)),
                ('summary', models.TextField(blank=True)),
                ('license', models.CharField(blank=True, max_length=64)),
                ('tasks', models.JSONField(blank=True, default=list)),
                ('modality', models.JSONField(blank=True, default=list)),
                ('languages', models.JSONField(blank=True, default=list)),
                ('upstream_size', models.BigIntegerField(blank=True, help_text='approximate bytes upstream', null=True)),
                ('upstream_files', models.BigIntegerField(blank=True, help_text='approximate files upstream', null=True)),
                ('homepage', models.URLField(blank=True, max_length=500)),
                ('paper', models.URLField(blank=True, max_length=500)),
                ('base_model', models.CharField(blank=True, max_length=200)),
                ('parameters', models.CharField(blank=True, max_length=32)),
                ('source', models.CharField(choices=[('seed', 'seed file'), ('sample', 'sample')], default='seed', max_length=8)),
                ('search_text', models.TextField(blank=True)),
                ('search', django.contrib.postgres.search.SearchVectorField(blank=True, null=True)),
                ('updated', models.DateTimeField(auto_now=True)),
                ('repo', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='catalog', to='repos.repo')),
            ],
            options={
                'verbose_name_plural': 'catalog entries',
            },
        ),
        migrations.CreateModel(
            name='CatalogFacet',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(max_length=12)),
                ('value', models.CharField(max_length=64)),
                ('repo', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='catalog_facets', to='repos.repo')),
            ],
            options={
                'indexes': [models.Index(fields=['kind', 'value', 'repo'], name='catalog_facet_lookup')],
                'constraints': [models.UniqueConstraint(fields=('repo', 'kind', 'value'), name='catalog_facet_unique')],
            },
        ),
    ]
