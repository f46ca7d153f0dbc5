#!/bin/sh
# One-shot MinIO bootstrap for local development (run by the `minio-setup`
# service in docker-compose.yml, image minio/mc, this directory mounted
# read-only at /setup). Idempotent: safe to run again on every `up`.
#
#   1. register the `local` alias for the MinIO service
#   2. create the bucket (no-op if it exists)
#   3. import the bucket lifecycle configuration (replaces existing rules)
#
# Environment:
#   MINIO_ROOT_USER / MINIO_ROOT_PASSWORD  credentials (required)
#   MINIO_ENDPOINT   default http://minio:9000
#   BUCKET           default dropcode
#   LIFECYCLE_FILE   default /setup/lifecycle.minio.json
#                    (the MinIO variant - see README.md for why it is not
#                    lifecycle.json)
set -eu

: "${MINIO_ROOT_USER:?MINIO_ROOT_USER must be set}"
: "${MINIO_ROOT_PASSWORD:?MINIO_ROOT_PASSWORD must be set}"
MINIO_ENDPOINT="${MINIO_ENDPOINT:-http://minio:9000}"
BUCKET="${BUCKET:-dropcode}"
LIFECYCLE_FILE="${LIFECYCLE_FILE:-/setup/lifecycle.minio.json}"

# Keep mc's config somewhere writable whatever user the container runs as.
MC_CONFIG_DIR="${MC_CONFIG_DIR:-/tmp/.mc}"
export MC_CONFIG_DIR

# compose only starts us once MinIO's healthcheck passes, but retry briefly
# anyway so the script also works when run by hand.
attempt=1
until mc alias set local "$MINIO_ENDPOINT" "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD" >/dev/null; do
  if [ "$attempt" -ge 30 ]; then
    echo "setup: MinIO at $MINIO_ENDPOINT not reachable after $attempt attempts" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  sleep 2
done
echo "setup: alias 'local' -> $MINIO_ENDPOINT"

mc mb --ignore-existing "local/$BUCKET"

# `mc ilm rule import` (mc >= RELEASE.2022-12-24; formerly `mc ilm import`)
# reads the AWS-style JSON {"Rules":[...]} from stdin and REPLACES the whole
# lifecycle configuration, so re-running is idempotent.
mc ilm rule import "local/$BUCKET" < "$LIFECYCLE_FILE"
mc ilm rule ls "local/$BUCKET" || true   # informational only

echo "setup: bucket '$BUCKET' ready"
