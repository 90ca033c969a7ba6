# The modelscale operator image: non-root, and fine with a read-only root filesystem
# (no bytecode written at run time; the chart mounts an emptyDir at /tmp).
#   docker build -t ghcr.io/modelscale/modelscale-operator:0.1.0 .
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
# A venv at the same path and from the same Python as the final stage, so it can be copied.
RUN python -m venv /opt/modelscale \
 && /opt/modelscale/bin/pip install . \
 && /opt/modelscale/bin/python -m compileall -q /opt/modelscale/lib

FROM python:3.11-slim
LABEL org.opencontainers.image.title="modelscale-operator" \
      org.opencontainers.image.description="Kubernetes operator: Triton model serving scaled ahead of demand" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 65532 modelscale \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin modelscale
COPY --from=build /opt/modelscale /opt/modelscale
ENV PATH=/opt/modelscale/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric, so `runAsNonRoot: true` can verify it without reading /etc/passwd.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["modelscale"]
CMD ["run", "--all-namespaces"]
