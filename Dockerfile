# Cortex production image: the same runner commands `make run` uses, one process per container.
#   docker compose build && docker compose up     (see docker-compose.yml and .env.example)
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    # Static files and celery beat's schedule live here; nothing else is written at run time.
    CORTEX_HOME=/var/lib/cortex \
    HOST=0.0.0.0 \
    PORT=8000

WORKDIR /app
COPY . .

# collectstatic only imports settings, which need service URLs and a key to exist, not to work:
# the dummy values below never reach a running container.
RUN pip install . \
 && useradd --system --uid 10001 --home-dir /var/lib/cortex --shell /usr/sbin/nologin cortex \
 && DEBUG=0 SECRET_KEY=collectstatic-only DATABASE_URL=postgresql://build@/build REDIS_URL=redis://127.0.0.1:1/0 python manage.py collectstatic --no-input -v 0 \
 && mkdir -p /var/lib/cortex/run \
 && chown -R cortex:cortex /var/lib/cortex

USER cortex
EXPOSE 8000
CMD ["python", "-m", "cortex_site.runner", "web"]
