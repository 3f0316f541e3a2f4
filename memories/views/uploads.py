"""Uploaded documents → memories, one file at a time, each with its own outcome."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.template.defaultfilters import filesizeformat

from cortex_site.errors import CortexError, ServiceUnavailable
from memories.access import Principal
from memories.forms import split_tags
from memories.services.documents import SUPPORTED_EXTENSIONS, extract_text
from memories.services.memories import MemoryDraft, memory_create

ACCEPTED = SUPPORTED_EXTENSIONS


def max_bytes() -> int:
    return int(settings.CORTEX_MAX_UPLOAD_BYTES)


def _failure(name: str, status: int, code: str, message: str) -> dict[str, Any]:
    return {"name": name, "ok": False, "status": status, "error_code": code, "message": message}


def store_upload(principal: Principal, upload: UploadedFile, options: dict[str, Any]) -> dict[str, Any]:
    """Extract one file's text and store it through the write pipeline; never raises for a bad file."""
    name = PurePath(upload.name or "upload").name
    if PurePath(name).suffix.lower() not in ACCEPTED:
        return _failure(name, 415, "UNSUPPORTED_FILE_TYPE", f"{name}: only {', '.join(ACCEPTED)} files can be uploaded.")
    if (upload.size or 0) > max_bytes():
        # Refused before reading a byte of it.
        return _failure(
            name,
            413,
            "FILE_TOO_LARGE",
            f"{name} is {filesizeformat(upload.size or 0)}; the limit is {filesizeformat(max_bytes())}.",
        )
    try:
        document = extract_text(name, upload.read())
        result = memory_create(
            principal=principal,
            draft=MemoryDraft(
                content=document.text,
                title=document.title,
                scope=options["scope"],
                category=options.get("category") or "document",
                tags=split_tags(options.get("tags", "")),
                clearance_min=options["clearance_min"],
                source="Upload",
            ),
        )
    except ServiceUnavailable:
        return _failure(
            name,
            503,
            "EMBEDDING_UNAVAILABLE",
            f"{name} was not saved: the embedding service is unavailable. Retry this file in a moment.",
        )
    except CortexError as exc:
        return _failure(name, exc.status, exc.error_code, exc.message)
    memory = result.memory
    return {
        "name": name,
        "ok": True,
        "status": 200 if result.deduplicated else 201,
        "deduplicated": result.deduplicated,
        "title": memory.title,
        "url": f"/memories/{memory.pk}/",
        "scope": memory.scope.slug,
        "scope_name": memory.scope.name or memory.scope.slug,
        "clearance_min": options["clearance_min"],
        "message": "Already in Cortex" if result.deduplicated else f"Saved to {memory.scope.name or memory.scope.slug}",
    }
