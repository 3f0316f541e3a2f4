"""Reliability step "input": hostile uploads and bad webhook deliveries against the real server.

    .venv/bin/python bench/reliability/r30_input.py            # or: make reliability RELIABILITY=r30_input.py
    .venv/bin/python bench/reliability/r30_input.py --no-before

What it measures (section `input` of docs/reliability.md):

- **uploads**: each hostile file of tests/hardening/input/hostile_files.py posted to
  `POST /api/memories/extract-decisions` on Cortex's web process (uvicorn, as `make run` starts it,
  DEBUG off) with a bearer token: the answer (status, error_code), its time as the client saw it,
  and the web process's peak RSS while answering (VmHWM, reset before each request through
  /proc/<pid>/clear_refs). The parse itself runs in a bounded child of the fork server; its peak
  is measured by running the same function (`extraction.extract_document`, same limits) in a
  fresh process of its own and reading that process's VmHWM growth.
- **before**: for the two files of the outside pass, what the previous unbounded readers cost
  (python-docx's Document over the whole zip bomb, pypdf counting 5,000 pages), in a process each.
- **bodies**: a declared 30 MiB multipart body to /memories/upload/ and to the webhook address, sent
  through a raw socket: how much had been sent when the 413 came back, and how fast.
- **webhooks**: each bad GitHub / Slack delivery (wrong signature, missing headers, stale timestamp,
  malformed JSON, wrong content type, replay): status, error_code, time.

Each run uses its own database on the embedded server (cortex_bench_input), recreated.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# tests/ before bench/: both have a github_webhooks module, and this step wants the tests' helpers.
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from recall import database_url, machine, percentiles  # noqa: E402

from reliability.report import write_section  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))  # bench/recall.py put bench/ first again
HOME = Path(os.environ.get("CORTEX_BENCH_HOME") or Path(tempfile.gettempdir()) / "cortex-bench-input").resolve()
MIB = 1024 * 1024


def _bench_connectors() -> Any:
    """bench/connectors.py's helpers (setup_django, free_port, wait_http); its name is the Django app's."""
    spec = importlib.util.spec_from_file_location("bench_connectors", ROOT / "bench" / "connectors.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hostile_uploads() -> list[tuple[str, str, Any]]:
    """(label, file name, maker) — made in the process that sends or parses them."""
    from document_files import make_docx, make_pdf
    from hardening.input import hostile_files as h

    return [
        ("zip bomb .docx (20 MB of tiny paragraphs)", "minutes.docx", lambda: h.zip_bomb_docx(20)),
        ("zip whose directory lies about its size", "minutes.docx", lambda: h.lying_zip_docx(100, 8)),
        (".docx of 400,000 characters", "novel.docx", lambda: h.wordy_docx(400_000)),
        ("PDF of 5,000 pages", "pages.pdf", lambda: h.thousand_page_pdf(5000)),
        ("PDF of 5,000 pages whose /Count says 1", "pages.pdf", lambda: h.lying_count_pdf(5000)),
        ("PDF without a text layer (20 pages)", "scan.pdf", lambda: h.scanned_pdf(20)),
        ("PDF stream inflating to 400 MB", "bomb.pdf", lambda: h.inflating_pdf(400)),
        ("9 MB single-line .txt", "line.txt", lambda: h.single_line_text(9)),
        ("PDF named .docx", "renamed.docx", lambda: make_pdf([["renamed"]])),
        ("ordinary .docx (control)", "ok.docx", lambda: make_docx(["We decided to ship on Friday."] * 50)),
    ]


def vm(pid: int | str, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def reset_peak(pid: int | str) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")


# -- phase: parse one file in this process (what the bounded child runs) --------------------------------
def phase_extract(index: int, before: bool) -> dict[str, Any]:
    import django

    django.setup()
    from django.conf import settings

    from memories.services import extraction

    label, name, make = hostile_uploads()[index]
    data = make()
    extension = Path(name).suffix
    import lxml.etree  # noqa: F401 - the child has these preloaded; count only what parsing adds
    import pypdf  # noqa: F401

    reset_peak("self")
    base = vm("self", "VmRSS")
    started = time.perf_counter()
    outcome = "ok"
    if before:
        import io

        if extension == ".docx":
            from docx import Document

            document = Document(io.BytesIO(data))
            outcome = f"{sum(1 for _ in document.iter_inner_content()):,} paragraphs read"
        else:
            from pypdf import PdfReader

            outcome = f"{len(PdfReader(io.BytesIO(data)).pages):,} pages counted"
    elif extension in (".docx", ".pdf"):
        try:
            extraction.extract_document(name, extension, data, settings.CORTEX_MAX_CONTENT_CHARS, settings.CORTEX_MAX_PDF_PAGES)
        except extraction.ExtractionRefused as refused:
            outcome = refused.error_code
    seconds = time.perf_counter() - started
    return {"label": label, "seconds": seconds, "peak_growth": vm("self", "VmHWM") - base, "outcome": outcome}


# -- phase: the server ----------------------------------------------------------------------------------
def raw_post(port: int, path: str, headers: dict[str, str], declared: int, send_bytes: int) -> dict[str, Any]:
    """Send the headers of a `declared`-byte body and `send_bytes` of it, then wait for the answer."""
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {declared}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        sent = 0
        conn.settimeout(0.2)
        answer = b""
        while sent < send_bytes:
            try:
                answer = conn.recv(65536)
                if answer:
                    break
            except TimeoutError:
                pass
            try:
                sent += conn.send(b"x" * 65536)
            except (TimeoutError, BlockingIOError):
                continue
        conn.settimeout(30)
        while b"\r\n\r\n" not in answer:
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    return {"status": status, "ms": (time.perf_counter() - started) * 1000, "sent": sent}


def phase_server(repeat: int) -> dict[str, Any]:
    helpers = _bench_connectors()
    # Loading bench/connectors.py put bench/ (with its own github_webhooks) ahead of tests/ again.
    sys.path.insert(0, str(ROOT / "tests"))
    helpers.setup_django()
    from django.core.management import call_command

    call_command("collectstatic", interactive=False, verbosity=0)  # as `make run` does: pages need the manifest
    import httpx
    from github_webhooks import WEBHOOK_SECRET, github_fixture, github_signature
    from support.slack_workspace import BOT_TOKEN, SIGNING_SECRET, fixture_bytes, sign

    from connectors.services.connectors import connector_create
    from cortex_site.runner import web_command
    from memories.access import Principal
    from memories.models import Membership
    from memories.services import tenancy

    org = tenancy.organization_create(slug="input-bench")
    admin = tenancy.member_add(organization=org, email="admin@input.bench", clearance="Executive", role=Membership.Role.ADMIN)
    admin = Membership.objects.select_related("organization", "user").get(pk=admin.pk)
    _token, secret = tenancy.token_create(membership=admin, name="bench")
    principal = Principal(admin)
    github = connector_create(
        principal=principal,
        kind="github",
        name="Robots",
        config={"repositories": ["robvanderleek/create-issue-branch"], "api_url": "http://127.0.0.1:9", "mode": "webhook"},
        credentials={"webhook_secret": WEBHOOK_SECRET},
    ).connector
    workspace = helpers.make_workspace(1)  # the loopback Slack the connector's set-up checks its channel with
    slack = connector_create(
        principal=principal,
        kind="slack",
        name="Slack",
        config={"channels": ["C00000000"], "api_url": workspace.api_url},
        credentials={"bot_token": BOT_TOKEN, "signing_secret": SIGNING_SECRET},
    ).connector

    port = helpers.free_port()
    os.environ.update(PORT=str(port), HOST="127.0.0.1", ALLOWED_HOSTS="127.0.0.1,localhost", WEB_CONCURRENCY="1")
    logs = HOME / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / "web.log").open("w") as web_log:
        web = subprocess.Popen(web_command(), env=dict(os.environ), cwd=ROOT, stdout=web_log, stderr=subprocess.STDOUT)
    result: dict[str, Any] = {"uploads": [], "webhooks": [], "bodies": []}
    try:
        base = f"http://127.0.0.1:{port}"
        helpers.wait_http(f"{base}/api/me", timeout=300)  # a loaded machine starts slowly
        client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"}, timeout=120)
        client.get("/api/me")
        result["server_rss_idle"] = vm(web.pid, "VmRSS")
        for label, name, make in hostile_uploads():
            data = make()
            times, peaks, answer = [], [], {}
            for _ in range(repeat):
                reset_peak(web.pid)
                started = time.perf_counter()
                response = client.post("/api/memories/extract-decisions", files={"file": (name, data)}, data={"wait": "0"})
                times.append((time.perf_counter() - started) * 1000)
                peaks.append(vm(web.pid, "VmHWM"))
                answer = response.json()
            code = answer.get("error_code") or ("job " + str(answer.get("status")))
            result["uploads"].append(
                {
                    "label": label,
                    "bytes": len(data),
                    "status": response.status_code,
                    "code": code,
                    "ms": times,
                    "peak": max(peaks),
                }
            )
            print(f"upload {label}: {response.status_code} {code} {percentiles(times)['p50']:.0f} ms", flush=True)

        pr = github_fixture("pull_request__closed_merged.json")
        message = fixture_bytes("event_callback__message")
        replay_headers = {"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": str(uuid.uuid4())}
        replay_headers["X-Hub-Signature-256"] = github_signature(pr)

        def gh(body: bytes, **changes: str | None) -> dict[str, str]:
            headers = {"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": str(uuid.uuid4())}
            headers["X-Hub-Signature-256"] = github_signature(body)
            headers["Content-Type"] = "application/json"
            for key, value in changes.items():
                key = key.replace("_", "-")
                if value is None:
                    headers.pop(key, None)
                else:
                    headers[key] = value
            return headers

        slack_json = {"Content-Type": "application/json"}
        cases: list[tuple[str, str, bytes, dict[str, str]]] = [
            ("GitHub: wrong signature", "github", pr, gh(pr, X_Hub_Signature_256="sha256=" + "0" * 64)),
            ("GitHub: missing signature", "github", pr, gh(pr, X_Hub_Signature_256=None)),
            ("GitHub: missing X-GitHub-Event", "github", pr, gh(pr, X_GitHub_Event=None)),
            ("GitHub: malformed JSON", "github", b'{"action":', gh(b'{"action":')),
            ("GitHub: form-encoded", "github", pr, gh(pr, Content_Type="application/x-www-form-urlencoded")),
            ("GitHub: first delivery", "github", pr, {**replay_headers, "Content-Type": "application/json"}),
            ("GitHub: replayed delivery id", "github", pr, {**replay_headers, "Content-Type": "application/json"}),
            ("Slack: stale timestamp", "slack", message, {**sign(message, timestamp=int(time.time()) - 600), **slack_json}),
            ("Slack: wrong signature", "slack", message, {**sign(message, secret="another-secret"), **slack_json}),  # noqa: S106 - wrong on purpose),
            ("Slack: malformed JSON", "slack", b'{"type":', {**sign(b'{"type":'), **slack_json}),
        ]
        ids = {"github": github.pk, "slack": slack.pk}
        for label, kind, body, headers in cases:
            reset_peak(web.pid)
            times = []
            for _ in range(repeat if "delivery" not in label else 1):
                started = time.perf_counter()
                response = httpx.post(f"{base}/api/webhooks/{kind}/{ids[kind]}", content=body, headers=headers)
                times.append((time.perf_counter() - started) * 1000)
            answer = response.json()
            code = answer.get("error_code") or ("duplicate" if answer.get("duplicate") else "accepted")
            result["webhooks"].append(
                {"label": label, "status": response.status_code, "code": code, "ms": times, "peak": vm(web.pid, "VmHWM")}
            )
            print(f"webhook {label}: {response.status_code} {code}", flush=True)

        for label, path, headers in [
            ("30 MiB multipart to /memories/upload/", "/memories/upload/", {"Content-Type": "multipart/form-data; boundary=x"}),
            (
                "30 MiB to extract-decisions",
                "/api/memories/extract-decisions",
                {"Content-Type": "multipart/form-data; boundary=x", "Authorization": f"Bearer {secret}"},
            ),
            ("30 MiB to the GitHub webhook", f"/api/webhooks/github/{github.pk}", {"Content-Type": "application/json"}),
        ]:
            reset_peak(web.pid)
            answer = raw_post(port, path, headers, 30 * MIB, 30 * MIB)
            answer.update(label=label, peak=vm(web.pid, "VmHWM"))
            result["bodies"].append(answer)
            print(f"body {label}: {answer['status']} after {answer['sent']:,} bytes, {answer['ms']:.0f} ms", flush=True)
    finally:
        web.terminate()
        web.wait(20)
    return result


# -- driver ---------------------------------------------------------------------------------------------
def run(env: dict[str, str], *args: str) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--phase", *args]
    completed = subprocess.run(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True, timeout=900, check=False)
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    for line in completed.stdout.splitlines():
        if not line.startswith("RESULT "):
            print(line, flush=True)
    if completed.returncode != 0 or not lines:
        return {"error": f"exit {completed.returncode}"}
    return dict(json.loads(lines[-1][len("RESULT ") :]))


def mb(n: float) -> str:
    return f"{n / MIB:,.0f} MB"


def report(server: dict[str, Any], parses: list[dict[str, Any]], befores: list[dict[str, Any]], repeat: int) -> str:
    from django.conf import settings

    lines = [
        f"Each upload posted {repeat}× to `POST /api/memories/extract-decisions` (multipart, bearer token) on uvicorn "
        "(one worker, DEBUG off). *answer* = client-side time (p50 of the runs); *web peak* = the web process's VmHWM "
        f"while answering (idle RSS {mb(server['server_rss_idle'])}); *parse peak* = RSS growth of a fresh process running "
        "the same parse with the same limits (what the bounded child adds to its fork-server baseline). "
        f"Limits: {settings.CORTEX_EXTRACT_MEMORY_MB} MB address space and {settings.CORTEX_EXTRACT_SECONDS} s CPU per parse, "
        f"{settings.CORTEX_MAX_PDF_PAGES} PDF pages, {settings.CORTEX_MAX_CONTENT_CHARS:,} characters, "
        f"{mb(settings.CORTEX_MAX_UPLOAD_BYTES)} per file.",
        "",
        "| upload | size | answer | time (p50) | web peak | parse time | parse peak |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    by_label = {p["label"]: p for p in parses}
    for upload in server["uploads"]:
        parse = by_label.get(upload["label"], {})
        parse_time = f"{parse['seconds']:.2f} s" if "seconds" in parse else "—"
        parse_peak = mb(parse["peak_growth"]) if "peak_growth" in parse else "—"
        lines.append(
            f"| {upload['label']} | {upload['bytes'] / 1024:,.0f} KB | {upload['status']} `{upload['code']}` | "
            f"{percentiles(upload['ms'])['p50']:,.0f} ms | {mb(upload['peak'])} | {parse_time} | {parse_peak} |"
        )
    if befores:
        lines += ["", "The readers before this change, on the same files, in a process each (no limits):", ""]
        lines += ["| file | what it did | time | peak RSS growth |", "| --- | --- | ---: | ---: |"]
        for before in befores:
            if "error" in before:
                lines.append(f"| {before.get('label', '?')} | failed: {before['error']} | — | — |")
            else:
                lines.append(
                    f"| {before['label']} | {before['outcome']} | {before['seconds']:.1f} s | {mb(before['peak_growth'])} |"
                )
    lines += ["", "Oversized bodies (headers declare 30 MiB; the client keeps sending until an answer arrives):", ""]
    lines += ["| request | answer | sent when answered | time | web peak |", "| --- | --- | ---: | ---: | ---: |"]
    for body in server["bodies"]:
        lines.append(
            f"| {body['label']} | {body['status']} | {body['sent'] / 1024:,.0f} KB | {body['ms']:,.0f} ms | {mb(body['peak'])} |"
        )
    lines += ["", "Webhook deliveries (p50 of the runs; the replay is sent once after its first delivery):", ""]
    lines += ["| delivery | answer | time | web peak |", "| --- | --- | ---: | ---: |"]
    for hook in server["webhooks"]:
        lines.append(
            f"| {hook['label']} | {hook['status']} `{hook['code']}` | "
            f"{percentiles(hook['ms'])['p50']:,.1f} ms | {mb(hook['peak'])} |"
        )
    return "\n".join(lines)


def drive(args: argparse.Namespace) -> int:
    import django

    from cortex_site.runner import embedded_services, ensure_dev_connector_key

    HOME.mkdir(parents=True, exist_ok=True)
    ensure_dev_connector_key(HOME)
    with embedded_services(HOME) as services:
        env = {**os.environ, **services}
        env.update(
            DJANGO_SETTINGS_MODULE="cortex_site.settings",
            CORTEX_HOME=str(HOME),
            SECRET_KEY=env.get("SECRET_KEY") or "bench-only-secret-key",
            CORTEX_EMBEDDER="hash",
            CORTEX_DEMO="0",
            PYTHONUNBUFFERED="1",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        env["DATABASE_URL"] = database_url(env["DATABASE_URL"], "cortex_bench_input")
        os.environ.update(env)
        django.setup()
        server = run(env, "server", str(args.repeat))
        if "error" in server:
            raise SystemExit(f"server phase failed ({server['error']})")
        parses = [run(env, "extract", str(i)) for i in range(len(hostile_uploads()))]
        befores = [run(env, "before", str(i)) for i in (0, 3)] if args.before else []
    body = report(server, parses, befores, args.repeat)
    print(body)
    print(f"\nmachine: {machine()}")
    write_section("input", "Bad input: hostile uploads, oversized bodies, bad webhooks", body)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="requests per upload / webhook case (default 3)")
    parser.add_argument("--no-before", dest="before", action="store_false", help="skip the unbounded readers' figures")
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        name, *rest = args.phase
        result = phase_server(int(rest[0])) if name == "server" else phase_extract(int(rest[0]), before=name == "before")
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    return drive(args)


if __name__ == "__main__":
    raise SystemExit(main())
