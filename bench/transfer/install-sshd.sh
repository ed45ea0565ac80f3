#!/usr/bin/env bash
# install-sshd.sh: make sure OpenSSH's sshd (and its sftp-server) is
# installed, for the sftp rows of `go run ./bench/transfer`. Debian/Ubuntu
# only; needs root (or sudo). Does nothing when sshd is already there.
set -euo pipefail
for p in /usr/sbin/sshd /usr/bin/sshd; do
  [ -x "$p" ] && exit 0
done
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends openssh-server openssh-client
