"""Delivery.audited: whether the delivery's webhook.accept/webhook.ignore is in the audit chain
(now appended after the answer); via, request_id and client_ip: what that event carries from it.

Deliveries stored before this migration had their event recorded by their answer: they are
added as audited, so the batch step never records them a second time.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("connectors", "0003_scale_same_org_keys"),
        ("memories", "0020_digest_membership_email"),
    ]

    operations = [
        migrations.AddField(
            model_name="delivery",
            name="audited",
            field=models.BooleanField(default=True),
        ),
        migrations.AlterField(
            model_name="delivery",
            name="audited",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="delivery",
            name="client_ip",
            field=models.GenericIPAddressField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="delivery",
            name="request_id",
            field=models.CharField(blank=True, default="", max_length=128),
        ),
        migrations.AddField(
            model_name="delivery",
            name="via",
            field=models.CharField(blank=True, default="", max_length=20),
        ),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(condition=models.Q(("audited", False)), fields=["received_at"], name="delivery_unaudited"),
        ),
    ]
