FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app

# The shared rules (envelope, schema, statistics, campaigns) are protocol/; the agent is built into the served wheel.
COPY protocol/ protocol/
COPY agent/ agent/
COPY pyproject.toml manage.py ./
COPY benchhub/ benchhub/
RUN pip install ./protocol . && useradd --system --home /app benchhub

COPY templates/ templates/
COPY static/ static/
COPY patches/ patches/

# The agent's wheel, served at /agent/<wheel> for `pipx install` from the site.
RUN python manage.py build_agent_wheel
RUN mkdir -p /app/staticfiles && chown benchhub /app/staticfiles
USER benchhub
EXPOSE 8000
