"""The small programs the host layer runs on the host: POSIX sh (dash-safe) and Python 3.6+ stdlib.

Each is passed as one argv element (`sh -c SCRIPT sh ARGS...` / `python3 -c SCRIPT ARGS...`), so its
arguments reach it as data and are never parsed by a shell. See research/ssh.md §3 for why each
step is there (setsid + pidfile written inside the new session; `kill -s TERM -- -PGID` because dash
rejects other spellings; zombies do not count as alive).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

FOLLOWER = (Path(__file__).with_name("follow_on_host.py")).read_text(encoding="utf-8")
PROCGROUP = (Path(__file__).with_name("procgroup.py")).read_text(encoding="utf-8")

# alive PGID: true if the group has a member that is not a zombie.
_ALIVE = """alive() { ps -e -o pgid= -o stat= 2>/dev/null | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { f = 1 } END { exit !f }'; }
"""

# sh -c ALIVE sh PGID -> exit 0 if the group has a live (non-zombie) member, else 1
ALIVE = _ALIVE + 'alive "$1"\n'

# sh -c SPAWN sh CWD LOG PIDFILE PYTHON ARGV... -> "STARTED <pgid>" | "ALREADY <pgid>"
# (PYTHON stands in for setsid(1) where there is none, e.g. macOS)
SPAWN = (
    _ALIVE
    + r"""cwd=$1; log=$2; pidf=$3; py=$4; shift 4
cd -- "$cwd" || { echo "cannot enter $cwd" >&2; exit 3; }
if [ -s "$pidf" ]; then
  old=$(cat -- "$pidf")
  case $old in ''|*[!0-9]*) ;; *) if alive "$old"; then echo "ALREADY $old"; exit 0; fi ;; esac
fi
if [ -s "$log" ]; then
  ts=$(date +%Y%m%d-%H%M%S); dst="$log.$ts"; n=1
  while [ -e "$dst" ]; do dst="$log.$ts-$n"; n=$((n + 1)); done
  mv -f -- "$log" "$dst" || exit 4
fi
rm -f -- "$pidf"
inner='echo $$ > "$0.tmp" && mv -f -- "$0.tmp" "$0" && exec "$@"'
if command -v setsid >/dev/null 2>&1; then
  setsid sh -c "$inner" "$pidf" "$@" > "$log" 2>&1 < /dev/null &
else
  "$py" -c 'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' sh -c "$inner" "$pidf" "$@" > "$log" 2>&1 < /dev/null &
fi
i=0
while [ ! -s "$pidf" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
[ -s "$pidf" ] || { echo "no pidfile appeared at $pidf" >&2; exit 5; }
echo "STARTED $(cat -- "$pidf")"
"""
)

# sh -c STOP sh PGID TICKS(0.1 s) -> STOPPED | KILLED | NOT_RUNNING
STOP = (
    _ALIVE
    + r"""pg=$1; ticks=$2
alive "$pg" || { echo NOT_RUNNING; exit 0; }
kill -s TERM -- "-$pg" 2>/dev/null
i=0
while [ $i -lt "$ticks" ]; do
  alive "$pg" || { echo STOPPED; exit 0; }
  sleep 0.1; i=$((i + 1))
done
alive "$pg" || { echo STOPPED; exit 0; }
kill -s KILL -- "-$pg" 2>/dev/null
i=0
while [ $i -lt 50 ] && alive "$pg"; do sleep 0.1; i=$((i + 1)); done
echo KILLED
"""
)

# python -c PROCESSES [--ps] -> one JSON object per process. From /proc (exact argv); where there is
# no /proc (macOS) or with --ps, from `ps` (argv split on spaces, no cwd).
PROCESSES = r"""
import json, os, subprocess, sys, time
out = []
if os.path.isdir("/proc/self") and "--ps" not in sys.argv:
    tck = os.sysconf("SC_CLK_TCK")
    btime = 0
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                btime = int(line.split()[1])
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                st = f.read()
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if not cmd:
            continue
        rest = st[st.rindex(b")") + 2:].split()
        try:
            cwd = os.readlink("/proc/%s/cwd" % name)
        except OSError:
            cwd = None
        argv = [a.decode("utf-8", "replace") for a in cmd.rstrip(b"\0").split(b"\0")]
        out.append(json.dumps({"pid": int(name), "pgid": int(rest[2]),
                               "start": btime + int(rest[19]) / float(tck), "argv": argv, "cwd": cwd}))
else:
    env = dict(os.environ, LC_ALL="C", TZ="UTC")
    text = subprocess.check_output(["ps", "-axww", "-o", "pid=,pgid=,lstart=,command="], env=env)
    for line in text.decode("utf-8", "replace").splitlines():
        f = line.split()
        if len(f) < 8:
            continue
        try:
            start = time.mktime(time.strptime(" ".join(f[2:7]), "%a %b %d %H:%M:%S %Y")) - time.timezone
        except ValueError:
            start = 0.0
        out.append(json.dumps({"pid": int(f[0]), "pgid": int(f[1]), "start": start, "argv": f[7:], "cwd": None}))
print("\n".join(out))
"""

# python -u -c WATCHDOG ARGV... : run ARGV in its own group; stdin EOF (channel or connection gone)
# -> stop the group (TERM, 2 s, KILL) with procgroup.py's `stop_group`, whose source comes first.
# Exit code is ARGV's (128+signal when killed by one).
WATCHDOG = (
    PROCGROUP
    + r"""
import subprocess, sys, threading
try:
    p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, start_new_session=True)
except OSError as e:
    sys.stderr.write("cannot run %s: %s\n" % (sys.argv[1], e))
    sys.exit(127)
fired = threading.Event()
def watch():
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    fired.set()
    stop_group(p.pid, 2.0, 2.0)
t = threading.Thread(target=watch, daemon=True)
t.start()
rc = p.wait()
if fired.is_set():
    t.join(5)
sys.exit(rc if rc >= 0 else 128 - rc)
"""
)


def default_pidfile(log_path: str) -> str:
    """`.<log name>.pid` beside the log: outside the log's rotation names (`<log>.*`)."""
    head, tail = posixpath.split(log_path)
    return posixpath.join(head, f".{tail}.pid")
