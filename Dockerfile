# syntax=docker/dockerfile:1
# GENERATED from build/image (WSU in spec.go) by make dockerfile: do not edit.
# The same image as make image builds without a daemon; the build context is
# the directory make image-context stages (the static wsu, the CA bundle,
# passwd and group):
#   make image-context
#   docker build -f Dockerfile -t wsu \
#     --build-arg VERSION=$(git describe --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) bin/image/context
# COPY --chmod needs BuildKit (Docker 23+, podman/buildah).
FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
COPY --chmod=0644 passwd /etc/passwd
COPY --chmod=0644 group /etc/group
COPY --chmod=0644 ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --chmod=0755 wsu /usr/local/bin/wsu
COPY --chmod=0755 wsu-controller /usr/local/bin/wsu-controller
ENV PATH=/usr/local/bin:/usr/bin:/bin
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
WORKDIR /
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/wsu"]
LABEL org.opencontainers.image.title="wsu" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.source="https://github.com/wsu-project/wsu"
