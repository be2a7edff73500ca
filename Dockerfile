FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app

# The shared rules (envelope, schema, statistics, campaigns) are protocol/; the agent is built into the served wheel.
COPY protocol/ protocol/
COPY agent/ agent/
COPY pyproject.toml manage.py ./
COPY benchhub/ benchhub/
# PyICU (TR39 skeletons of handles, benchhub/accounts/names.py) builds against the system's ICU.
RUN apt-get update && apt-get install -y --no-install-recommends g++ pkg-config libicu-dev \
    && pip install ./protocol . && useradd --system --home /app benchhub \
    && apt-get purge -y g++ && rm -rf /var/lib/apt/lists/*

COPY templates/ templates/
COPY static/ static/
COPY patches/ patches/
COPY deploy/gunicorn.conf.py deploy/

# The agent's wheel, served at /agent/<wheel> for `pipx install` from the site; built here, where
# pip can fetch the build backend, so the web service's prepare_site finds it current. No secret
# key exists at build time and no database is touched: the development settings suffice.
RUN DJANGO_DEBUG=1 python manage.py build_agent_wheel
# /snapshots: docker-compose.yml's snapshots volume, which takes this owner when first created.
RUN mkdir -p /app/staticfiles /snapshots && chown benchhub /app/staticfiles /snapshots
USER benchhub
EXPOSE 8000
