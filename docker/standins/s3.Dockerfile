# A local stand-in for chrislusf/seaweedfs (compose.yaml's s3), for machines that reach no image
# registry: the container test (tests/docker/test_stack.py) runs the stack with it. moto's S3 in
# server mode (PyPI: moto[s3] and Flask, what its server mode needs for S3 alone) on port 8333 with
# /healthz, keeping its buckets in /data across restarts (docker/standins/s3_server.py), on the base of
# docker/debootstrap-base.sh.
#
#   docker build -f docker/standins/s3.Dockerfile --build-arg BASE_IMAGE=... -t TAG docker/
#   (the context is docker/; docker/wheels/ holds moto[s3], flask, flask-cors and their dependencies)
ARG BASE_IMAGE

FROM ${BASE_IMAGE} AS build
COPY wheels/ /wheels/
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheels "moto[s3]" flask flask-cors

FROM ${BASE_IMAGE}
COPY --from=build /opt/venv /opt/venv
COPY standins/s3_server.py /usr/local/lib/s3_server.py
RUN groupadd --gid 1000 seaweed \
 && useradd --uid 1000 --gid 1000 --home-dir /data seaweed \
 && mkdir -p /data \
 && chown seaweed:seaweed /data
USER 1000:1000
ENV S3_IGNORE_SUBDOMAIN_BUCKETNAME=true
VOLUME /data
EXPOSE 8333
ENTRYPOINT ["/opt/venv/bin/python", "/usr/local/lib/s3_server.py"]
CMD ["mini", "-dir=/data"]
