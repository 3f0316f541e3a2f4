"""Memory.post_write_pending: which memories still need their post-write work.

Existing rows get False — they were written before the marker and their task has had its chance;
new rows are True until the task runs (the model's default). The partial index is built
concurrently, so this migration is not atomic.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("memories", "0018_scale_same_org_keys")]

    operations = [
        # A constant default: PostgreSQL adds the column without rewriting the table.
        migrations.AddField(model_name="memory", name="post_write_pending", field=models.BooleanField(default=False)),
        migrations.AlterField(model_name="memory", name="post_write_pending", field=models.BooleanField(default=True)),
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                fields=["updated_at"], name="memory_post_write_pending", condition=Q(post_write_pending=True, status="active")
            ),
        ),
    ]
