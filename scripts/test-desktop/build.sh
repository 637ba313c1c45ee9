#!/usr/bin/env bash
# Builds the hcu test desktop image: a local stand-in for the official OSWorld guest (Debian bookworm
# from debootstrap + apt, no registry, no Dockerfile), serving the same in-guest HTTP API on port 5000.
# usage: build.sh IMAGE_TAG
# Skip-if-current: the image carries the label hcu.test_desktop.rev (a hash of every file in this
# directory); when the tagged image already has this rev, nothing is done. The expensive part (the
# base rootfs with all packages) is cached in build/test-desktop/ keyed by packages, wheels and recipe.
# The tag is only moved when the whole build succeeded.
set -euo pipefail
tag=${1:?usage: build.sh IMAGE_TAG}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=$repo/build/test-desktop
t0=$SECONDS

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9  # one build at a time (CI, make and the tests may all ask for the image)

hash_files() { (cd "$here" && sha256sum "$@" | sha256sum | cut -c1-16); }
rev=$(cd "$here" && hash_files $(find . -type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -name '*.md' | LC_ALL=C sort))
current=$(docker image inspect -f '{{index .Config.Labels "hcu.test_desktop.rev"}}' "$tag" 2>/dev/null || true)
if [[ $current == "$rev" ]]; then
  echo "build.sh: $tag is current (rev $rev), nothing to do"
  exit 0
fi

# Leftovers of a build that was killed (the lock says no other build is running).
for stale in "$cache"/image.* "$cache"/base.*; do
  [[ -d $stale ]] || continue
  umount "$stale"/rootfs/{var/cache/apt/archives,proc,sys,dev/pts} 2>/dev/null || true
  rm -rf --one-file-system "$stale"
done

base=$cache/base-$(hash_files packages.txt wheels.txt make-base.sh).tar
if [[ ! -f $base ]]; then
  bash "$here/make-base.sh" "$base"
  find "$cache" -maxdepth 1 -name 'base-*.tar' ! -path "$base" -delete  # keep one base only
fi

work=$(mktemp -d "$cache/image.XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
root=$work/rootfs
mkdir "$root"
tar -C "$root" -xf "$base"

# user 1000 with sudo (its password is set from CLIENT_PASSWORD at container start), ~/Desktop
chroot "$root" useradd -m -u 1000 -s /bin/bash -G sudo user
install -d -o 1000 -g 1000 "$root/home/user/Desktop"
install -m 755 "$here/entrypoint.sh" "$root/usr/local/bin/hcu-entrypoint"
install -m 755 "$here/session.sh" "$root/usr/local/bin/hcu-session"
install -m 755 "$here/gnome-screenshot" "$root/usr/local/bin/gnome-screenshot"
install -d "$root/opt/hcu"
install -m 644 "$here"/{guest_server,guest_ax,guest_screen,guest_recording,testapp,wait_for_frame}.py "$root/opt/hcu/"
install -m 755 "$here/terminal.py" "$root/opt/hcu/terminal.py"
ln -sf /opt/hcu/terminal.py "$root/usr/local/bin/hcu-terminal"
ln -sf /opt/hcu/terminal.py "$root/usr/local/bin/gnome-terminal"
install -m 644 "$here/apps/text-editor.desktop" "$root/usr/share/applications/hcu-text-editor.desktop"
install -m 644 "$here/apps/mimeapps.list" "$root/etc/xdg/mimeapps.list"
# The official guest's applications, set up the way OSWorld's tasks expect them (README: fidelity table).
install -m 755 "$here/apps/google-chrome" "$root/usr/bin/google-chrome-stable"
ln -sf google-chrome-stable "$root/usr/bin/google-chrome"
# Google Chrome's layout: /opt/google/chrome/chrome is Chromium's binary (a hard link, so every Chrome
# process is named `chrome`, as the tasks' `pkill chrome` expects), beside links to Chromium's resources.
install -d "$root/opt/google/chrome"
for file in "$root"/usr/lib/chromium/*; do
  [[ ${file##*/} == chromium ]] || ln -s "/usr/lib/chromium/${file##*/}" "$root/opt/google/chrome/"
done
ln "$root/usr/lib/chromium/chromium" "$root/opt/google/chrome/chrome"
python3 "$here/apps/chrome_brand.py" "$root/usr/lib/chromium/locales/en-US.pak"  # titles "... - Google Chrome"
install -m 644 "$here/apps/google-chrome.desktop" "$root/usr/share/applications/google-chrome.desktop"
# (Debian links LibreOffice's share/registry and Thunderbird's defaults to these folders under /etc)
install -m 644 "$here/apps/libreoffice-hcu.xcd" "$root/etc/libreoffice/registry/hcu.xcd"
install -m 644 "$here/apps/thunderbird-hcu.js" "$root/etc/thunderbird/pref/hcu.js"
echo '(check-updates no)' >>"$root/etc/gimp/2.0/gimprc"
# `pip install` as on the official Ubuntu 22.04 guest, which predates PEP 668's externally-managed marker
rm -f "$root"/usr/lib/python3*/EXTERNALLY-MANAGED
install -D -m 644 "$here/apps/org.freedesktop.timedate1.service" \
  "$root/usr/local/share/dbus-1/system-services/org.freedesktop.timedate1.service"
install -d -o 1000 -g 1000 "$root/home/user/.config" "$root/home/user/.config/vlc"
install -m 644 -o 1000 -g 1000 "$here/apps/vlcrc" "$root/home/user/.config/vlc/vlcrc"
[[ -e $root/usr/share/novnc/index.html ]] || ln -s vnc.html "$root/usr/share/novnc/index.html"
# GNOME's terminal shortcut, as on the official Ubuntu guest
sed -i 's|<keyboard>|<keyboard>\n    <keybind key="C-A-t"><action name="Execute"><command>hcu-terminal</command></action></keybind>|' \
  "$root/etc/xdg/openbox/rc.xml"
grep -q 'key="C-A-t"' "$root/etc/xdg/openbox/rc.xml" || { echo "build.sh: openbox keybinding not installed" >&2; exit 1; }
# A desktop background, as on the official Ubuntu guest (OSWorld's vm_wallpaper getter reads the file GNOME's
# picture-uri names; Debian's default names a gnome-backgrounds file this image lacks): Ubuntu's path, plain.
install -d "$root/usr/share/backgrounds"
chroot "$root" python3 -c 'from PIL import Image; Image.new("RGB", (1920, 1080), (44, 0, 30)).save(
    "/usr/share/backgrounds/warty-final-ubuntu.png")'
printf '%s\n' '[org.gnome.desktop.background]' \
  "picture-uri='file:///usr/share/backgrounds/warty-final-ubuntu.png'" \
  "picture-uri-dark='file:///usr/share/backgrounds/warty-final-ubuntu.png'" \
  >"$root/usr/share/glib-2.0/schemas/90_hcu-background.gschema.override"
chroot "$root" glib-compile-schemas /usr/share/glib-2.0/schemas
# Byte-compile what Debian's packaging did not: user `user` cannot write __pycache__ there, so every
# `python -c "import pyautogui"` (OSWorld setup steps) and every server start would compile again.
chroot "$root" python3 -m compileall -q /opt/hcu /usr/local/lib/python3.11/dist-packages >/dev/null
rm -f "$root/etc/resolv.conf" "$root/etc/hostname"

env_vars='LANG=C.UTF-8 DISPLAY=:0 XDG_SESSION_TYPE=x11 XDG_RUNTIME_DIR=/run/user/1000'
env_vars+=' DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus'
tar -C "$root" --numeric-owner -c . | docker import \
  -c "ENV $env_vars" \
  -c 'EXPOSE 5000' \
  -c 'WORKDIR /home/user' \
  -c "LABEL hcu.test_desktop.rev=$rev" \
  -c 'CMD ["/usr/local/bin/hcu-entrypoint"]' \
  - "$tag" >/dev/null
# Replaced test desktop images (untagged now) go, except those a container still uses.
for old in $(docker images -q -f dangling=true -f label=hcu.test_desktop.rev); do
  docker image rm "$old" >/dev/null 2>&1 || true
done
size=$(docker image inspect -f '{{.Size}}' "$tag")
rm -rf --one-file-system "$work"  # (2+ GB unpacked: part of the build's time)
echo "build.sh: built $tag (rev $rev, $((size / 1000000)) MB) in $((SECONDS - t0)) s"
