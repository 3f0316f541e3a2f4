"""Citus plan, step 1 of 3: organization_id on the tenant tables that lacked it (nullable for now).

ApiToken.scopes' table becomes an explicit model (ApiTokenScope) on the same table, so it can
carry the column too; the database table is not recreated.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0014_authority_redaction_hold"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ApiTokenScope",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("apitoken", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to="memories.apitoken")),
                        ("scope", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to="memories.scope")),
                    ],
                    options={"db_table": "memories_apitoken_scopes", "unique_together": {("apitoken", "scope")}},
                ),
                migrations.AlterField(
                    model_name="apitoken",
                    name="scopes",
                    field=models.ManyToManyField(
                        blank=True, related_name="+", through="memories.ApiTokenScope", to="memories.scope"
                    ),
                ),
            ],
            database_operations=[],
        ),
        migrations.AddField(
            model_name="scopegrant",
            name="organization",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="memories.organization"
            ),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="organization",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="memories.organization"
            ),
        ),
        migrations.AddField(
            model_name="apitokenscope",
            name="organization",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="memories.organization"
            ),
        ),
        migrations.AddField(
            model_name="oauthgrant",
            name="organization",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="memories.organization"
            ),
        ),
    ]
