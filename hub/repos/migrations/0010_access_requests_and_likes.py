# Gates learn manual approval: a GateAcceptance becomes an AccessRequest with a status (the rows
# there are acceptances, so they start as accepted; new requests start pending). And likes.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('repos', '0009_repoblob_first_seen'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='repo',
            name='gate_mode',
            field=models.CharField(choices=[('auto', 'auto: accepted at once'),
                                            ('manual', 'manual: the owners review each request')],
                                   default='auto', max_length=8),
        ),
        migrations.RemoveConstraint(model_name='gateacceptance', name='gate_accepted_once'),
        migrations.RenameModel(old_name='GateAcceptance', new_name='AccessRequest'),
        migrations.RenameField(model_name='accessrequest', old_name='accepted', new_name='created'),
        migrations.AlterField(
            model_name='accessrequest',
            name='created',
            field=models.DateTimeField(auto_now_add=True, help_text='when it was asked for (or granted)'),
        ),
        migrations.AlterField(
            model_name='accessrequest',
            name='repo',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='access_requests',
                                    to='repos.repo'),
        ),
        migrations.AddField(
            model_name='accessrequest',
            name='status',
            field=models.CharField(choices=[('pending', 'pending'), ('accepted', 'accepted'), ('rejected', 'rejected')],
                                   default='accepted', max_length=8),
        ),
        migrations.AlterField(
            model_name='accessrequest',
            name='status',
            field=models.CharField(choices=[('pending', 'pending'), ('accepted', 'accepted'), ('rejected', 'rejected')],
                                   default='pending', max_length=8),
        ),
        migrations.AddField(
            model_name='accessrequest',
            name='decided',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='accessrequest',
            name='decided_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                    related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='accessrequest',
            name='rejection_reason',
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name='accessrequest',
            name='fields',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name='accessrequest',
            name='granted',
            field=models.BooleanField(default=False),
        ),
        migrations.AddConstraint(
            model_name='accessrequest',
            constraint=models.UniqueConstraint(fields=('repo', 'user'), name='access_request_once'),
        ),
        migrations.AddIndex(
            model_name='accessrequest',
            index=models.Index(fields=['repo', 'status', '-id'], name='access_request_list'),
        ),
        migrations.CreateModel(
            name='RepoLike',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created', models.DateTimeField(auto_now_add=True)),
                ('repo', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='liked_by',
                                           to='repos.repo')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                           to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'indexes': [models.Index(fields=['repo', '-id'], name='repolike_likers')],
                'constraints': [models.UniqueConstraint(fields=('user', 'repo'), name='repolike_once')],
            },
        ),
    ]
