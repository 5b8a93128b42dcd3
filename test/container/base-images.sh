#!/usr/bin/env bash
# Makes, on a machine with no image registry, local images under the public names that the
# Containerfile and compose.yaml use, so that the files tested are the files users build:
#   node:24-bookworm-slim   Debian bookworm (debootstrap, minbase) + the Node 24 binary from the npm
#                           registry's `node` package + npm, and a `node` user (uid 1000), as the
#                           official image has (node/Containerfile)
#   postgres:15-bookworm    Debian's PostgreSQL 15 behind an entrypoint that does what the official
#                           image's does for compose.yaml: POSTGRES_* variables, initdb scripts, the
#                           data in /var/lib/postgresql/data (postgres/)
#   nginx:stable-bookworm   Debian's nginx-light, serving /etc/nginx/conf.d/*.conf as the official
#                           image does (nginx/)
# An image of one of these names that this script did not make (a real one, pulled) is used as it
# is. One it made is kept while its recipe (its folder here, the Node and npm versions) hashes the
# same, so a second run costs nothing and a changed recipe remakes only that image.
# Needs: root, podman (the `podman` on PATH that run.sh sets up), debootstrap.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

NODE_VERSION=${CONTAINER_NODE_VERSION:-24.21.0}
LABEL=io.notes-service.test.recipe
# The Debian mirror this machine's apt uses (deb.debian.org when none is found).
mirror=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list \
  2>/dev/null | grep -v security | head -n1 | awk '{print $2}' || true)
mirror=${mirror:-http://deb.debian.org/debian}
npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
npm_version=$(node -p "require('$npm_dir/package.json').version")

# recipe NAME EXTRA: the hash of the folder test/container/NAME and EXTRA.
recipe() {
  { cat "$here/$1"/*; echo "$2"; } | sha256sum | cut -c1-16
}

# state NAME RECIPE: 'made' if NAME is an image made by RECIPE; 'foreign' if it exists and was not
# made here; 'missing' otherwise (absent, or made by another recipe).
state() {
  local found
  if ! found=$(podman image inspect --format "{{index .Labels \"$LABEL\"}}" "$1" 2>/dev/null); then
    echo missing
  elif [ "$found" = "$2" ]; then
    echo made
  elif [ -z "$found" ] || [ "$found" = '<no value>' ]; then
    echo foreign
  else
    echo missing
  fi
}

# wanted NAME RECIPE: 0 when NAME must be made, saying otherwise why it is used as it is.
wanted() {
  case $(state "$1" "$2") in
  made) echo "base images: $1 already made by this recipe ($2)"; return 1 ;;
  foreign) echo "base images: $1 exists and was not made here: using it as it is"; return 1 ;;
  esac
}

work=$(mktemp -d /var/tmp/notes-service-base.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The plain Debian image the others start from: debootstrap's minbase (206 MB; from 24 s to several
# minutes, as the mirror answers), once.
debian=localhost/notes-service-test/debian:bookworm
debian_recipe=bookworm-minbase-1
debian_image() {
  [ "$(state "$debian" "$debian_recipe")" = made ] && return
  echo "base images: debootstrap bookworm from $mirror"
  local at=$SECONDS
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 20 "$work/debootstrap.log" >&2; return 1; }
  # apt's lists and caches are not part of an image (the official ones remove them too).
  rm -rf "$work"/rootfs/var/lib/apt/lists/* "$work"/rootfs/var/cache/apt/*.bin
  tar -C "$work/rootfs" -c . | podman import --quiet --change "LABEL $LABEL=$debian_recipe" \
    --change 'CMD ["bash"]' - "$debian" >/dev/null
  rm -rf "$work/rootfs"
  echo "base images: $debian made in $((SECONDS - at)) s"
}

# build NAME RECIPE CONTEXT: builds NAME from CONTEXT's Containerfile on the Debian image;
# --network=host lets apt inside the build reach the mirror as this machine does.
build() {
  debian_image
  local at=$SECONDS
  podman build --quiet --pull=never --network=host --format docker \
    --build-arg "BASE=$debian" --build-arg "MIRROR=$mirror" --label "$LABEL=$2" \
    -t "$1" "$3" >/dev/null
  echo "base images: $1 made in $((SECONDS - at)) s"
}

node_recipe=$(recipe node "node $NODE_VERSION npm $npm_version")
if wanted node:24-bookworm-slim "$node_recipe"; then
  node24="$root/.node24/node_modules/node/bin/node"
  if [ "$("$node24" --version 2>/dev/null)" != "v$NODE_VERSION" ]; then
    # As .ci/run does: the registry's `node` package fetches the binary for this platform.
    echo '{"private": true, "allowScripts": {"node": true}}' >"$work/package.json"
    npm install --prefix "$work" --no-save --no-audit --no-fund "node@$NODE_VERSION" >/dev/null
    node24="$work/node_modules/node/bin/node"
  fi
  cp -r "$here/node" "$work/node"
  mkdir -p "$work/node/usr/local/bin" "$work/node/usr/local/lib/node_modules"
  cp "$(readlink -f "$node24")" "$work/node/usr/local/bin/node"
  cp -r "$npm_dir" "$work/node/usr/local/lib/node_modules/npm"
  build node:24-bookworm-slim "$node_recipe" "$work/node"
  rm -rf "$work/node"
fi

postgres_recipe=$(recipe postgres '')
wanted postgres:15-bookworm "$postgres_recipe" && build postgres:15-bookworm "$postgres_recipe" "$here/postgres"
nginx_recipe=$(recipe nginx '')
wanted nginx:stable-bookworm "$nginx_recipe" && build nginx:stable-bookworm "$nginx_recipe" "$here/nginx"
exit 0
