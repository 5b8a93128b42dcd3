# Sourced by run.sh (and usable by hand: `. test/container/podman-env.sh`): puts first on PATH a
# `podman` that carries this machine's flags, so that every command in the harness, the compose
# tool's included, is the plain `podman ...` or `podman-compose ...` that a user types:
# - runc, not crun: crun fails here with "cgroups in hybrid mode not supported";
# - cgroupfs: there is no systemd to manage the cgroups;
# - a containers.conf with no default ulimits, else a container's start fails on setrlimit.
# These stay out of the Containerfile and compose.yaml: they are this machine's, not the user's.
podman_env_dir=${PODMAN_ENV_DIR:-/var/tmp/notes-service-podman}
mkdir -p "$podman_env_dir/bin"
real_podman=$(PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$podman_env_dir/bin" | paste -sd:) \
  command -v podman)
runc_path=$(command -v runc || echo /usr/sbin/runc)
printf '[containers]\ndefault_ulimits = []\n' >"$podman_env_dir/containers.conf"
cat >"$podman_env_dir/bin/podman" <<EOF
#!/bin/sh
CONTAINERS_CONF=$podman_env_dir/containers.conf exec $real_podman --runtime $runc_path --cgroup-manager cgroupfs "\$@"
EOF
chmod +x "$podman_env_dir/bin/podman"
case ":$PATH:" in
*":$podman_env_dir/bin:"*) ;;
*) export PATH="$podman_env_dir/bin:$PATH" ;;
esac
