# The vector (HNSW, cosine) and full-text (GIN) indexes of memory chunks, built concurrently
# so a deploy never locks writes to a large chunk table.

import django.contrib.postgres.indexes
import pgvector.django
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memories", "0002_memory"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memorychunk",
            index=pgvector.django.HnswIndex(
                ef_construction=64, fields=["embedding"], m=16, name="chunk_embedding_hnsw", opclasses=["vector_cosine_ops"]
            ),
        ),
        AddIndexConcurrently(
            model_name="memorychunk",
            index=django.contrib.postgres.indexes.GinIndex(fields=["search_vector"], name="chunk_search_gin"),
        ),
    ]
