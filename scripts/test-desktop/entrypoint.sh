#!/bin/sh
# Container entrypoint of the test desktop (runs as root, like the official guest's boot): sets the
# password of `user` from CLIENT_PASSWORD, prepares the runtime directories, then runs the desktop
# session and the in-guest API server as `user`. RAM_SIZE, CPU_CORES, DISK_SIZE, /dev/kvm and
# /System.qcow2 belong to the official QEMU guest's contract and are accepted and ignored here.
set -eu
# A desktop started again from a kept image (committed from a running container: a kept final desktop) finds
# what its last session left: the X server's lock and socket, the session's runtime folder, the system bus's pid
# and the marker below. A container's first start has none of them; in the QEMU guest (not PID 1) /run is new.
if [ "$$" = 1 ]; then
  rm -rf /tmp/.X0-lock /tmp/.X11-unix /run/user/1000 /run/dbus /run/systemd/system
fi
HCU_T0_NS=$(date +%s%N)
export HCU_T0_NS
echo "$(date +%T.%N) entrypoint start" >/tmp/hcu-session.log
chown user:user /tmp/hcu-session.log
printf 'user:%s\n' "${CLIENT_PASSWORD:-password}" | chpasswd
unset CLIENT_PASSWORD
install -d -o user -g user -m 700 /run/user/1000
install -d -m 1777 /tmp/.X11-unix
# timedatectl as on a systemd-booted guest: the marker it checks and a system bus that starts
# systemd-timedated on demand (under systemd, the QEMU guest, both are already there).
if [ ! -d /run/systemd/system ]; then
  install -d /run/systemd/system /run/dbus
  dbus-daemon --system --fork
fi
exec setpriv --reuid=1000 --regid=1000 --init-groups \
  env HOME=/home/user USER=user LOGNAME=user SHELL=/bin/bash PATH=/usr/local/bin:/usr/bin:/bin \
  /usr/local/bin/hcu-session
