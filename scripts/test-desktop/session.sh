#!/bin/bash
# The desktop session of `user` (PID 1 after entrypoint.sh). Start order matters (measured, see
# docs in the hcu notes): X first, then the session bus at the fixed address every process uses, then
# the AT-SPI bus, then openbox (wait for its --startup marker: windows mapped earlier may stay
# unmapped), then the test app. Prints DESKTOP_READY <seconds since container start> when the app is
# in the accessibility tree and its window is viewable.
set -u
export NO_AT_BRIDGE=0 GTK_MODULES=gail:atk-bridge GNOME_ACCESSIBILITY=1 QT_ACCESSIBILITY=1 \
  QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1 XDG_SESSION_TYPE=x11 XDG_CURRENT_DESKTOP=GNOME
# Thunderbird's window class as on the official guest ("Mail.thunderbird", which tasks close by class);
# Debian's build would otherwise append its profile name ("thunderbird-default").
export MOZ_APP_REMOTINGNAME=thunderbird
cd "$HOME"

stop() { kill $(jobs -p) 2>/dev/null; exit 0; }
trap stop TERM INT

since_start() { local ms=$(( ($(date +%s%N) - ${HCU_T0_NS:-0}) / 1000000 )); printf '%d.%02d' $((ms / 1000)) $((ms % 1000 / 10)); }
step() { echo "$(date +%T.%N) $*" >>/tmp/hcu-session.log; }  # per-step timing, for diagnosing slow starts

# Step timeouts are upper bounds: a container starts each step in well under a second, the same session in an
# emulated VM (scripts/qemu-guest, TCG) takes tens of seconds per step.
step_timeout=120
poll() { # poll TIMEOUT_S COMMAND...: run COMMAND every 50 ms until it succeeds
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "hcu-session: timed out waiting for: $*" >&2; return 1; }
    sleep 0.05
  done
}

step "session start"
Xvfb :0 -screen 0 1920x1080x24 -nolisten tcp -ac >/tmp/xvfb.log 2>&1 &
poll $step_timeout xdpyinfo
step "X up"

dbus-daemon --session --address="$DBUS_SESSION_BUS_ADDRESS" --fork --nopidfile
# The API server needs X and the session bus only (the AT-SPI bus is found through the latter).
python3 /opt/hcu/guest_server.py >/tmp/guest_server.log 2>&1 &
/usr/libexec/at-spi-bus-launcher --launch-immediately --a11y=1 >/dev/null 2>&1 &
poll $step_timeout dbus-send --session --print-reply --dest=org.a11y.Bus /org/a11y/bus org.a11y.Bus.GetAddress
dbus-send --session --print-reply --dest=org.a11y.Bus /org/a11y/bus \
  org.freedesktop.DBus.Properties.Set string:org.a11y.Status string:IsEnabled variant:boolean:true >/dev/null
step "session and accessibility buses up"

marker=$XDG_RUNTIME_DIR/openbox-started
rm -f "$marker"
openbox --startup "touch $marker" >/tmp/openbox.log 2>&1 &
poll $step_timeout test -e "$marker"
step "openbox up"

python3 /opt/hcu/testapp.py >/tmp/testapp.log 2>&1 &
if python3 /opt/hcu/wait_for_frame.py "HCU Test App" $step_timeout && step "test app in the accessibility tree" \
  && poll $step_timeout xdotool search --onlyvisible --name "HCU Test App"; then
  echo "DESKTOP_READY $(since_start)"
else
  echo "DESKTOP_FAILED: the test app did not appear in the accessibility tree and on screen" >&2
fi

# VNC on 8006 as the official image serves it: noVNC in a browser, through websockify, to an x11vnc that
# socat starts per connection (nothing polls the screen while nobody watches). Started after readiness:
# nothing in a task waits for it. x11vnc finds the display in $DISPLAY (a colon in the EXEC address would
# split it).
socat TCP-LISTEN:5900,bind=127.0.0.1,fork,reuseaddr EXEC:"x11vnc -inetd -nopw -shared -quiet" >/tmp/vnc.log 2>&1 &
websockify --web /usr/share/novnc 8006 127.0.0.1:5900 >>/tmp/vnc.log 2>&1 &

wait  # returns when every child has exited (the container then stops) or on TERM/INT (trap above)
