#!/usr/bin/env bash
# `npm run test:container` (after it compiles): builds the image from the Containerfile with
# Podman, on local stand-ins for the public base images (base-images.sh), then runs the checks in
# dist/test/container/ against the image alone (memory store) and against compose.yaml (two
# instances and nginx on PostgreSQL). Says the image's size, the build's time and the whole run's.
# Whatever the outcome, removes every container, volume, network and image this run made (they
# carry its run id); the base images stay, for the next run.
# Needs root, podman, runc, podman-compose and debootstrap (Debian: apt-get install podman runc
# podman-compose debootstrap).
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS
for tool in podman runc podman-compose debootstrap; do
  if ! command -v "$tool" >/dev/null; then
    echo "container test: $tool is missing (apt-get install podman runc podman-compose debootstrap)" >&2
    exit 1
  fi
done
. test/container/podman-env.sh

run_id=$(date +%s)-$$
# The image under test; compose.yaml builds and runs ${NOTES_IMAGE:-notes-service}.
export NOTES_IMAGE=localhost/notes-service-test:$run_id
export CONTAINER_TEST_RUN=$run_id
export CONTAINER_TEST_LABEL=io.notes-service.test.run=$run_id

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  # Containers: those the tests started, labelled with the run and named after it, the compose
  # project's (nstest-RUN_service_1) included.
  {
    podman ps -aq --filter "label=$CONTAINER_TEST_LABEL"
    podman ps -aq --filter "name=nstest-$run_id"
  } | sort -u | xargs -r podman rm -f -t 0 >/dev/null 2>&1 || true
  podman volume ls -q | grep -F "nstest-$run_id" | xargs -r podman volume rm -f >/dev/null 2>&1 || true
  podman network ls -q | grep -F "nstest-$run_id" | xargs -r podman network rm -f >/dev/null 2>&1 || true
  # The image under test goes; the build's layers stay as Podman's cache for the next run.
  podman image rm -f "$NOTES_IMAGE" >/dev/null 2>&1 || true
  echo "container test: cleaned up run $run_id; $((SECONDS - started)) s in all"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bash test/container/base-images.sh

# The build users run (`podman build -f Containerfile -t notes-service .`), plus only what this
# machine needs: its certificate store lent to `npm ci` (the npm registry is reached through it),
# no pulling (no registry: the base is the local stand-in), Docker's format (keeps HEALTHCHECK).
npmrc=$podman_env_dir/npmrc
printf 'cafile=/etc/ssl/certs/ca-certificates.crt\nupdate-notifier=false\n' >"$npmrc"
at=$SECONDS
podman build --quiet --pull=never --format docker --network=host \
  -v /etc/ssl/certs:/etc/ssl/certs:ro -v "$npmrc:/root/.npmrc:ro" \
  --label "$CONTAINER_TEST_LABEL" -f Containerfile -t "$NOTES_IMAGE" . >/dev/null
build_s=$((SECONDS - at))
size=$(podman image inspect --format '{{.Size}}' "$NOTES_IMAGE")
base=$(podman image inspect --format '{{.Size}}' node:24-bookworm-slim)
printf 'container test: image built in %d s: %d MB, %d MB on top of node:24-bookworm-slim (%d MB)\n' \
  "$build_s" $((size / 1000000)) $(((size - base) / 1000000)) $((base / 1000000))

node --test --test-concurrency=1 --test-reporter=spec dist/test/container/*.test.js
