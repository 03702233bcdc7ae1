# Herald's container image: Node 24 on Debian 13 ("trixie"). The current uWebSockets.js build
# needs glibc >= 2.38, so the image is based on trixie, not on the bookworm images.
#
#   docker build -t herald .
#   docker run -p 6001:6001 -v herald-data:/var/lib/herald \
#     -v /etc/herald/herald.json:/etc/herald/herald.json:ro -e HERALD_CONFIG=/etc/herald/herald.json herald
#
# Without a config file Herald refuses to serve its public development credentials on 0.0.0.0;
# `-e HERALD_EXPOSE_DEVELOPMENT_DEFAULTS=1` allows it for a throwaway try-out.
#
# The build stage runs scripts/build-on-debian.sh: the same build steps CI runs in its Debian 13
# root (.ci/debian13) before the test suite.

FROM node:24-trixie-slim AS build
WORKDIR /build
COPY . .
RUN sh scripts/build-on-debian.sh && npm prune --omit=dev

FROM node:24-trixie-slim
ENV NODE_ENV=production \
    HERALD_HOST=0.0.0.0 \
    HERALD_PORT=6001 \
    HERALD_DATA_DIR=/var/lib/herald
WORKDIR /opt/herald
COPY --from=build /build/package.json ./package.json
COPY --from=build /build/node_modules ./node_modules
COPY --from=build /build/dist ./dist
RUN mkdir -p /var/lib/herald && chown node:node /var/lib/herald
# The official Node images' unprivileged user (uid 1000).
USER node
VOLUME /var/lib/herald
EXPOSE 6001
# Ready: 200 while Herald accepts traffic, 503 while it drains (plain HTTP on HERALD_PORT).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.HERALD_PORT || 6001) + '/ready').then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))"]
# Node itself is PID 1 (no npm or shell in between): SIGTERM reaches Herald, which closes
# WebSockets with 4200, finishes in-flight requests and flushes storage before it exits.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "--max-semi-space-size=2", "dist/src/cli.js"]
