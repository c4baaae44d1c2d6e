#!/usr/bin/env bash
# What the tests need from the system, installed with apt where a tool is missing (root; Debian or
# Ubuntu): a Python 3.11 or 3.12 with its venv module and headers, git, g++ (the CPU vLLM build
# compiles a helper at its first request), sshd and ssh, ip, ps, nsenter, rsync, docker,
# debootstrap, iptables, systemd-analyze, zsh and fish (shell completion is tested in each shell),
# jq (the README's jq examples are run).
# Nothing happens when everything is there.
#
# Installing docker.io would start the system's Docker daemon (and on systemd machines its
# socket, which starts it at the first connection); that daemon sets the iptables FORWARD
# policy to DROP and loads br_netfilter, cutting the bed's bridge. The bed runs its own
# daemons, so the system's is kept from starting: no service starts during the install, and
# one the install enabled is stopped and masked afterwards.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tools=(/usr/sbin/sshd ssh ssh-keygen ip ps nsenter setpriv rsync dockerd docker debootstrap iptables
       systemd-analyze g++ git zsh fish jq)
packages=(openssh-server openssh-client iproute2 procps util-linux rsync docker.io debootstrap iptables
          systemd g++ git zsh fish jq python3 python3-venv python3-dev)

headers='import os, sys, sysconfig; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))'
missing=()
for tool in "${tools[@]}"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if python=$("$here/python.sh" 2>/dev/null); then
  # Its headers too: torch compiles the CPU build's kernels against them.
  if ! "$python" -c "$headers"; then
    missing+=("$python headers")
    packages+=("$(basename "$python")-venv" "$(basename "$python")-dev")
  fi
else
  missing+=(python3.11/3.12)
fi
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "system-deps: missing ${missing[*]}: installing with apt" >&2

had_docker=no
command -v dockerd >/dev/null && had_docker=yes
# invoke-rc.d and deb-systemd-invoke ask this before starting a service: 101 means "not now".
# One that was there already is put back afterwards.
policy=/usr/sbin/policy-rc.d
saved=$policy.spark-launch-saved
[ ! -e "$policy" ] || mv "$policy" "$saved"
trap 'rm -f "$policy"; [ ! -e "$saved" ] || mv "$saved" "$policy"' EXIT
printf '#!/bin/sh\nexit 101\n' > "$policy"
chmod 755 "$policy"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}"
# Where the system's python3 is another version (Ubuntu 22.04: 3.10), a 3.12 or 3.11 of its own.
if ! "$here/python.sh" >/dev/null 2>&1; then
  for version in 3.12 3.11; do
    apt-cache show "python$version-venv" >/dev/null 2>&1 || continue
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python$version" "python$version-venv" "python$version-dev"
    break
  done
fi

if [ "$had_docker" = no ] && [ -d /run/systemd/system ]; then
  systemctl stop docker.socket docker.service containerd.service 2>/dev/null || true
  systemctl mask docker.socket docker.service 2>/dev/null || true
  echo "system-deps: the system's Docker daemon is masked (the test bed runs its own per node)" >&2
fi
"$here/python.sh" >/dev/null
