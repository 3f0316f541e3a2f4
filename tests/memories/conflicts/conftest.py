"""Writing memories the way production does, with the post-write work run (eagerly) on commit."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from memories.models import Membership, Memory
from memories.services.memories import MemoryDraft, memory_create


@pytest.fixture
def write(principal_of: Callable[[Membership], Any], django_capture_on_commit_callbacks: Any) -> Callable[..., Memory]:
    """`write(membership, content, **draft_fields)` → the stored memory, after its post-write task ran."""

    def write(membership: Membership, content: str, *, valid_from: datetime | None = None, **fields: Any) -> Memory:
        with django_capture_on_commit_callbacks(execute=True):
            result = memory_create(
                principal=principal_of(membership), draft=MemoryDraft(content=content, valid_from=valid_from, **fields)
            )
        result.memory.refresh_from_db()
        return result.memory

    return write
