"""Membership.digest_email (the daily digest opt-in, off for everyone) and digest_sent_at.

Both are added without rewriting the table: a constant default and a nullable column.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memories", "0019_faults_post_write_pending")]

    operations = [
        migrations.AddField(model_name="membership", name="digest_email", field=models.BooleanField(default=False)),
        migrations.AddField(model_name="membership", name="digest_sent_at", field=models.DateTimeField(blank=True, null=True)),
    ]
