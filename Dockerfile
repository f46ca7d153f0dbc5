# syntax=docker/dockerfile:1
#
# dropcode container image (multi-stage).
#   build:   full install (dev deps included) + `npm run build` -> dist/ (the server, and
#            the web page in dist/web: web/build.mjs compiles web/src and copies web/static)
#   runtime: production deps only + dist/, runs as the non-root `node` user.
#
# Build:  docker build -t dropcode .
# Run:    docker run --rm -p 127.0.0.1:3000:3000 -e API_KEYS=... dropcode
#
# `--ignore-scripts` is used for both installs, as package.json's allowScripts
# decides for every npm: the three dependencies with install scripts (esbuild,
# lmdb, msgpackr-extract) work from their prebuilt platform packages
# (test/install.test.ts). `npm run build` runs esbuild (the CLI served at
# /cli/dropcode.mjs is bundled with it) from that prebuilt binary.

# Node 24 is the active LTS; dropcode supports Node 22, 24 and 26 (package.json engines).
ARG NODE_IMAGE=node:24-bookworm-slim

# ---------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app

# Dependency layer first so it is cached until package*.json change.
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund

# Sources (see .dockerignore for what is excluded) and compile to dist/.
COPY . .
RUN npm run build

# ---------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
WORKDIR /app

# HOST/PORT match src/config.ts (whose defaults are the same); set explicitly
# because the server must listen on 0.0.0.0 inside a container. The metrics
# listener defaults to 127.0.0.1 (outside a container: the public must not read
# it); here loopback would hide it from the scraper too, so it listens on the
# container's network. Publish only PORT (`-p 127.0.0.1:3000:3000`, never -P):
# 9464 is for a scraper on the container network. METRICS_PORT=off: no metrics.
ENV NODE_ENV=production \
    DATA_DIR=/data \
    HOST=0.0.0.0 \
    PORT=3000 \
    METRICS_HOST=0.0.0.0 \
    METRICS_PORT=9464

# package.json is needed at runtime too ("type": "module" for dist/*.js).
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
    && npm cache clean --force

COPY --from=build /app/dist ./dist

# Application files stay root-owned (read-only for the app user); only the
# data directory is writable by `node` (uid 1000, provided by the base image).
RUN mkdir -p /data && chown node:node /data
VOLUME /data

USER node
# 3000: the service; 9464: Prometheus metrics, for the scraper only (not to be published).
EXPOSE 3000 9464

# No HEALTHCHECK: the slim image has no curl/wget; let the orchestrator probe
# the HTTP endpoint instead.
CMD ["node", "dist/server.js"]
