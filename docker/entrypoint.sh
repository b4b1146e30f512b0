#!/bin/sh
# The image's command (`knowledge-container`, docs/container.md): which process this container runs.
#
#   app      the Streamlit app on 0.0.0.0:8501 (shared: it asks for a sign-in, docs/security.md)
#   api      the REST API on 0.0.0.0:8900 (needs KNOWLEDGE_API_KEY, or accounts)
#   mcp      the MCP server over HTTP on 0.0.0.0:8901 (the same)
#   worker   an ingestion worker, its /healthz, /readyz and /metrics on 127.0.0.1:9101
#   init     a new stack's one-off set-up: the S3 bucket of file_store.s3_bucket (docker/init.py)
#   health   the health check: asks the process this container runs (docker/healthcheck.py)
#   other    run as given: `knowledge-container python -m knowledge users add ana --role admin`
#
# Arguments after the role go to its command (`worker --concurrency 2`). The ports inside the container
# are fixed; publish them on others (compose.yaml `ports:`).
set -eu
role=${1:-app}
[ $# -gt 0 ] && shift
case "$role" in
    app)
        # browser.serverAddress set: else Streamlit, headless on 0.0.0.0, asks checkip.amazonaws.com for
        # this machine's external address to print it (docs/security.md)
        exec streamlit run /app/app.py --server.address 0.0.0.0 --server.port 8501 --server.headless true \
            --server.fileWatcherType none --browser.serverAddress "${STREAMLIT_BROWSER_SERVER_ADDRESS:-localhost}" \
            "$@" ;;
    api)
        exec python -m knowledge serve --host 0.0.0.0 --port 8900 "$@" ;;
    mcp)
        exec python -m knowledge mcp --http --host 0.0.0.0 --port 8901 "$@" ;;
    worker)
        # the health listener only for the worker: an app's own worker process must not take the port
        KNOWLEDGE_INGEST__WORKER_HEALTH_PORT=${KNOWLEDGE_INGEST__WORKER_HEALTH_PORT:-9101}
        export KNOWLEDGE_INGEST__WORKER_HEALTH_PORT
        exec python -m knowledge worker "$@" ;;
    init)
        exec python /usr/local/lib/knowledge-container/init.py "$@" ;;
    health)
        exec python /usr/local/lib/knowledge-container/healthcheck.py "$@" ;;
    *)
        exec "$role" "$@" ;;
esac
