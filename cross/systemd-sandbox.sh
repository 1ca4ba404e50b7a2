#!/usr/bin/env bash
# Runs a private systemd (PID 1 of its own PID namespace) on the units of
# one directory only, for tests of didoedge's systemd units: ExecReload,
# the health timer restarting a dead pipeline, the syscall filter.
#
#   cross/systemd-sandbox.sh WORK UNITDIR TARGET
#
# WORK is bind-mounted at /run/didoedge-test inside; UNITDIR (inside WORK)
# is the only unit path besides empty stand-ins for the targets that
# default dependencies name (SYSTEMD_UNIT_PATH without the defaults: no
# journald, no tmpfiles, no getty). Drive it from the host with
#   nsenter -t PID -m -p systemctl ...      (PID: this script's child)
# and stop it by killing that PID (the namespace's init): everything in it
# dies, and the cgroup made for it is removed when the script returns.
#
# The host is left alone: new mount, PID, cgroup, UTS and IPC namespaces;
# private tmpfs on /run, /tmp, /var/tmp, /var/lib/systemd and /dev (with
# only the usual device nodes bound in); /proc/sys and /sys read-only; a
# cgroup2 mount whose root is a child cgroup made for this run. Needs root
# (CAP_SYS_ADMIN) and cgroup v2 (pure or hybrid).
set -euo pipefail
work=$1 units=$2 target=$3
[ "$(id -u)" -eq 0 ] || { echo "systemd-sandbox: needs root" >&2; exit 2; }
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  cg2=/sys/fs/cgroup
elif [ -f /sys/fs/cgroup/unified/cgroup.procs ]; then
  cg2=/sys/fs/cgroup/unified
else
  echo "systemd-sandbox: no cgroup v2 hierarchy" >&2; exit 2
fi
cg="$cg2/didoedge-systemd-test-$$"
mkdir "$cg"
cleanup() {
  # Children first; they are empty once the namespace's init is gone.
  for _ in $(seq 50); do
    find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [ -d "$cg" ] || return 0
    sleep 0.1
  done
  echo "systemd-sandbox: could not remove $cg" >&2
}
trap cleanup EXIT
# Enter the new cgroup before the cgroup namespace is made: it becomes
# the namespace's root.
sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' _ "$cg" \
  unshare --mount --pid --cgroup --uts --ipc --fork --mount-proc --propagation private \
  env WORK="$work" UNITS="$units" TARGET="$target" sh -ec '
    mount -t tmpfs -o mode=0755 tmpfs /run
    mkdir -p /run/didoedge-test
    # rbind: a test may mount a small tmpfs inside WORK (a full disk).
    mount --rbind "$WORK" /run/didoedge-test
    for d in /tmp /var/tmp; do mount -t tmpfs -o mode=1777 tmpfs "$d"; done
    mount -t tmpfs -o mode=0755 tmpfs /var/lib/systemd
    mkdir -p /run/dev
    mount -t tmpfs -o mode=0755,nosuid tmpfs /run/dev
    for n in null zero full random urandom tty ptmx; do
      touch /run/dev/$n && mount --bind /dev/$n /run/dev/$n
    done
    mkdir -p /run/dev/pts /run/dev/shm
    mount -t devpts -o newinstance,ptmxmode=0666 devpts /run/dev/pts
    mount -t tmpfs -o mode=1777 tmpfs /run/dev/shm
    mount --move /run/dev /dev
    mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys
    umount -R /sys/fs/cgroup
    mount --bind /sys /sys && mount -o remount,bind,ro /sys
    mount -t cgroup2 cgroup2 /sys/fs/cgroup
    hostname didoedge-sandbox
    # Empty stand-ins for the targets that default dependencies name
    # (the real ones would pull in the whole boot).
    mkdir -p /run/didoedge-stubs
    for u in sysinit basic shutdown sockets timers paths slices network network-online multi-user local-fs remote-fs; do
      printf "[Unit]\nDescription=sandbox stand-in for %s.target\n" $u > /run/didoedge-stubs/$u.target
    done
    exec env -i SYSTEMD_UNIT_PATH="/run/didoedge-test/$UNITS:/run/didoedge-stubs" container=didoedge-sandbox \
      PATH=/usr/sbin:/usr/bin:/sbin:/bin \
      /usr/lib/systemd/systemd --system --unit="$TARGET" --log-target=console --log-level=notice
  '
