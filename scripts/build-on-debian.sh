#!/bin/sh
# Herald's build steps on Debian, run from the repository root: the container image's build
# stage (Dockerfile) and CI's Debian 13 run (.ci/debian13) both run exactly this.
#
# fs-ext (the data dir lock) is compiled by node-gyp at `npm ci`: it needs python3, make and g++,
# installed here when missing (root only). Node's headers come from the Node installation itself
# (npm_config_nodedir), so node-gyp downloads nothing.
set -eu

missing=""
for tool in python3 make g++; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "build-on-debian: missing$missing; run: apt-get install -y python3 make g++" >&2
    exit 1
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 make g++
fi

if [ -z "${npm_config_nodedir:-}" ]; then
  node_prefix=$(dirname "$(dirname "$(command -v node)")")
  if [ -f "$node_prefix/include/node/node.h" ]; then
    npm_config_nodedir=$node_prefix
    export npm_config_nodedir
  fi
fi

npm ci
npm run build
