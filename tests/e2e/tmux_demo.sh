#!/usr/bin/env bash
# End-to-end: `eagle3-tui --demo` in a real terminal (tmux, 120x40). Waits for the first decode
# stats on screen, presses keys, asserts on `tmux capture-pane` text, quits, and checks that the
# demo's sim server was stopped. Exit 0 on success; on failure prints the screen and exits 1.
#
#   tests/e2e/tmux_demo.sh [path/to/eagle3-tui]
#
# The demo world is built on first use (cached under the user cache dir); E2E_BUILD_TIMEOUT bounds
# that wait (default 1800 s). The ledger goes to a temp data dir.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BIN="${1:-$ROOT/.venv/bin/eagle3-tui}"
BUILD_TIMEOUT="${E2E_BUILD_TIMEOUT:-1800}"
SOCK="eagle3-e2e-$$"
SESSION="demo"
WORK="$(mktemp -d)"
T() { tmux -L "$SOCK" "$@"; }

SERVER_PID=""
cleanup() {
    # Quit the console the normal way first (it stops the demo server), then tear tmux down.
    if T has-session -t "$SESSION" 2>/dev/null; then
        T send-keys -t "$SESSION" q 2>/dev/null || true
        for _ in $(seq 1 75); do
            T capture-pane -p -t "$SESSION" 2>/dev/null | grep -q "APP-EXIT" && break
            sleep 0.2
        done
    fi
    T kill-server 2>/dev/null || true
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM -- "-$SERVER_PID" 2>/dev/null || kill -TERM "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

screen() { T capture-pane -p -t "$SESSION" 2>/dev/null || true; }

fail() {
    echo "FAIL: $*" >&2
    echo "----- screen -----" >&2
    screen >&2
    echo "------------------" >&2
    exit 1
}

# wait_for REGEX TIMEOUT WHAT
wait_for() {
    local deadline=$((SECONDS + $2))
    while ((SECONDS < deadline)); do
        if screen | grep -Eq -- "$1"; then
            return 0
        fi
        if ! T has-session -t "$SESSION" 2>/dev/null; then
            fail "the console exited while waiting for $3"
        fi
        sleep 0.5
    done
    fail "timed out after $2 s waiting for $3 (/$1/)"
}

# wait_gone REGEX TIMEOUT WHAT
wait_gone() {
    local deadline=$((SECONDS + $2))
    while ((SECONDS < deadline)); do
        screen | grep -Eq -- "$1" || return 0
        sleep 0.5
    done
    fail "timed out after $2 s waiting for $3 (/$1/ still on screen)"
}

keys() { T send-keys -t "$SESSION" "$@"; sleep 0.6; }

command -v tmux >/dev/null || { echo "tmux not installed" >&2; exit 2; }
[ -x "$BIN" ] || { echo "no eagle3-tui at $BIN" >&2; exit 2; }

# Keep the pane after the app exits so its exit status can be read.
T new-session -d -s "$SESSION" -x 120 -y 40 \
    "unset COLUMNS LINES; sleep 1; env EAGLE3_TUI_DATA_DIR='$WORK/data' TERM=xterm-256color '$BIN' --demo; echo \"APP-EXIT \$?\"; sleep 30"
# Without an attached client tmux may fall back to 80x24: pin the window to 120x40 before the app
# starts (it sleeps 1 s), and keep COLUMNS/LINES out of its environment (they would override the pty size).
T set-option -t "$SESSION" window-size manual >/dev/null
T resize-window -t "$SESSION" -x 120 -y 40

# 1. The status bar, then the first decode stats (the world may be built first).
wait_for "eagle3-tui|demo" 60 "the first frame"
wait_for "server .*ready" "$BUILD_TIMEOUT" "the demo server to be ready"
wait_for "Decode batch" 240 "the first decode stats in the log"
wait_for "accept [0-9]+\.[0-9]+" 60 "accept length in the status bar"
screen | grep -q "asked 16" || fail "the status bar does not show the overridden draft tokens (asked 16)"
screen | grep -q "seeds' broken server" || fail "no demo hint"
SERVER_PID="$(screen | sed -n 's/.*pid \([0-9][0-9]*\).*/\1/p' | head -1)"
[ -n "$SERVER_PID" ] || fail "no server pid in the status bar"

# 2. Findings pane: the overridden steps flag is diagnosed.
keys 2
wait_for "silently replaced|num-draft-tokens" 30 "the steps-override finding"
wait_for "Evidence" 10 "the finding's evidence"

# 3. Help lists every key; esc closes it.
keys '?'
wait_for "Filter the log" 10 "help"
keys Escape
sleep 0.5
screen | grep -q "Filter the log" && fail "help did not close"

# 4. Live pane: regex filter, then pause.
keys 1
keys /
keys -l 'Decode'
keys Enter
wait_for "filter /Decode/" 10 "the filter to apply"
keys Space
wait_for "PAUSED" 10 "pause"
keys Space
wait_for "following" 10 "resume"

# 5. Config pane shows the served boundaries and the presets.
keys 3
wait_for "Served now" 10 "the config pane"
wait_for "train-\[:-1\]" 10 "the training-wiring preset"

# 6. The command palette applies the steps fix: diff modal, confirm, restart, new flags in the bar.
keys C-p
keys -l 'Apply preset: steps=15'
sleep 1
keys Enter
wait_for "Apply preset steps=15" 30 "the diff modal"
wait_for "speculative-num-steps 15" 10 "the launch-command diff"
keys y
wait_for "steps 15 topk 1 draft tokens 16" 180 "the restart with steps 15"
wait_gone "restart:" 180 "the restart to finish"
wait_for "server .*ready" 60 "the restarted server to be ready"
SERVER_PID="$(screen | sed -n 's/.*pid \([0-9][0-9]*\).*/\1/p' | head -1)"

# 7. Quit: the demo server is stopped.
keys q
sleep 1
if screen | grep -q "Quit anyway"; then  # a restart or check still finishing: confirm
    keys y
fi
wait_for "APP-EXIT 0" 120 "the console to exit cleanly"
for _ in $(seq 1 100); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.2
done
if kill -0 "$SERVER_PID" 2>/dev/null; then
    fail "quitting left the demo server (pid $SERVER_PID) running"
fi
echo "OK: demo reached decode stats, findings, help, filter, pause, config, palette apply + restart, quit stopped pid $SERVER_PID"
