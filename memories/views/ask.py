"""The Ask page: a question answered from the memories you may read, each sentence cited.

The page is streamed: everything up to the answer is sent at once (the question, a "composing"
line), then the answer and its sources once they are composed — with a language model that
takes seconds, the page is already there while it writes.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from memories.access import Principal
from memories.selectors.ask import ask
from memories.views.common import principal_view

ANSWER_SLOT = "<!--ask:answer-->"


@principal_view
@require_GET
def ask_page(request: HttpRequest, principal: Principal) -> HttpResponse | StreamingHttpResponse:
    question = request.GET.get("q", "").strip()[:2000]
    page = render_to_string("memories/ask.html", {"principal": principal, "question": question}, request=request)
    if not question:
        return HttpResponse(page.replace(ANSWER_SLOT, ""))
    head, tail = page.split(ANSWER_SLOT, 1)

    def stream() -> Iterator[str]:
        yield head
        result = ask(principal, question)
        yield render_to_string("memories/_ask_answer.html", {"result": result, "cited": result.cited()}, request=request)
        yield tail

    response = StreamingHttpResponse(stream(), content_type="text/html; charset=utf-8")
    response["Cache-Control"] = "no-store"  # the answer is the asker's own reading of memories
    return response
