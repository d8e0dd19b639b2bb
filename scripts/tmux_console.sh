#!/usr/bin/env bash
# Drive the console in a real terminal, as an operator would: start `vastui sim`, open `vastui console` against it
# in tmux at 160x48 (or the size given), visit every view, filter offers (a bad query, then a good one), mark two offers and rent them
# through the dialog (typing the count), watch them run, destroy both (typing the count), quit, and check that the
# simulator lists no instance afterwards. Every step checks the captured screen text; any miss exits non-zero.
#
#   scripts/tmux_console.sh            # 160x48; uses .venv/bin/vastui
#   scripts/tmux_console.sh 80x24      # the smallest terminal the console is made for
#   VASTUI=vastui scripts/tmux_console.sh
#   TMUX_CONSOLE_SCREENS=/tmp/screens scripts/tmux_console.sh 80x24   # also keep the screen of every step there
set -euo pipefail
size="${1:-160x48}"
[[ "$size" =~ ^([0-9]+)x([0-9]+)$ ]] || { echo "usage: $0 [COLSxROWS]   (e.g. 80x24; default 160x48)" >&2; exit 2; }
cols="${BASH_REMATCH[1]}"
rows="${BASH_REMATCH[2]}"
cd "$(dirname "$0")/.."
VASTUI=${VASTUI:-.venv/bin/vastui}
command -v tmux >/dev/null || { echo "tmux_console: tmux is not installed" >&2; exit 2; }
work=$(mktemp -d)
session="vastui-console-$$"
export VASTUI_DATA_DIR="$work/data" VASTUI_CONFIG_DIR="$work/config"
export VAST_API_KEY="tmux-console-key-13579"     # through the environment: never in argv
sim_pid=""

cleanup() {
  tmux kill-session -t "$session" 2>/dev/null || true
  [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null && wait "$sim_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "tmux_console: FAILED: $*" >&2
  echo "---- last screen ----" >&2
  tmux capture-pane -p -t "$session" >&2 2>/dev/null || true
  exit 1
}

screen() { tmux capture-pane -p -t "$session"; }

# wait_screen PATTERN WHAT [SECONDS]: poll the screen until PATTERN (grep -E) shows, or fail saying WHAT
wait_screen() {
  local pattern=$1 what=$2 deadline=$((SECONDS + ${3:-60}))
  until screen | grep -Eq -- "$pattern"; do
    [ $SECONDS -lt $deadline ] || fail "$what (no /$pattern/ on screen)"
    sleep 0.3
  done
  echo "ok: $what"
  keep_screen "$what"
}

# keep_screen WHAT: with TMUX_CONSOLE_SCREENS set, save the screen as it is now (numbered, named by the step)
step=0
keep_screen() {
  [ -n "${TMUX_CONSOLE_SCREENS:-}" ] || return 0
  step=$((step + 1))
  mkdir -p "$TMUX_CONSOLE_SCREENS"
  screen >"$TMUX_CONSOLE_SCREENS/$(printf '%02d' "$step")-$(echo "$1" | tr -c 'a-zA-Z0-9\n' '-' | cut -c1-40).txt"
}

# wait_gone PATTERN WHAT [SECONDS]: poll until PATTERN is no longer on the screen
wait_gone() {
  local pattern=$1 what=$2 deadline=$((SECONDS + ${3:-60}))
  while screen | grep -Eq -- "$pattern"; do
    [ $SECONDS -lt $deadline ] || fail "$what (/$pattern/ still on screen)"
    sleep 0.3
  done
  echo "ok: $what"
}

keys() { tmux send-keys -t "$session" "$@"; }

# type_count N: in a confirmation dialog, move to the field that asks for the count and type N; a person sees
# whether it landed (the field's "type it here" goes away) and moves on to the field again if not
type_count() {
  wait_screen "type it here" "the dialog asks for the count"
  for _ in 1 2 3 4; do
    # the focus moves when the dialog has handled shift+tab, not when the key is sent: a person's pause
    keys BTab; sleep 0.3; keys -l "$1"
    local deadline=$((SECONDS + 3))
    while screen | grep -q "type it here"; do
      [ $SECONDS -lt $deadline ] || break
      sleep 0.2
    done
    screen | grep -q "type it here" || { echo "ok: typed the count $1"; return; }
  done
  fail "could not type the count $1 into the dialog"
}

# type_text TEXT: type it into the focused input line and wait until that line shows it (an input draws as
# "▊  value"), as a person looks before pressing Enter
type_text() {
  tmux send-keys -t "$session" -l "$1"
  local deadline=$((SECONDS + 20))
  until screen | grep -Fq -- "▊  $1"; do
    [ $SECONDS -lt $deadline ] || fail "typed '$1' but it never showed"
    sleep 0.2
  done
}

# 1. the simulator, on a free port, its clock 60x so instances load in seconds. The console's own flows are under
#    test here (every rental must run so it can be stopped, started and destroyed), so the kind simulator, by name:
#    the realistic one (a rental may fail to schedule or never start) is driven by scripts/tmux_demo.sh.
VASTUI_SIM_API_KEY="$VAST_API_KEY" "$VASTUI" sim --port 0 --seed 7 --time-scale 60 --realism kind \
  >"$work/sim.out" 2>"$work/sim.err" &
sim_pid=$!
for _ in $(seq 1 100); do grep -q "VAST_URL=" "$work/sim.out" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'VAST_URL=[^ ]*' "$work/sim.out" | head -1 | cut -d= -f2)
[ -n "$url" ] || { cat "$work/sim.err" >&2; fail "the simulator did not print its URL"; }
export VAST_URL="$url"
echo "ok: simulator at $url"

# 2. the console in a terminal of the size asked (160x48 by default)
tmux new-session -d -s "$session" -x "$cols" -y "$rows" "env VASTUI_DATA_DIR='$VASTUI_DATA_DIR' VASTUI_CONFIG_DIR='$VASTUI_CONFIG_DIR' VAST_API_KEY='$VAST_API_KEY' VAST_URL='$VAST_URL' $VASTUI console; echo console-exited-\$?; sleep 30"
wait_screen "Offers: [0-9]+ shown" "offers listed"
wait_screen "credit" "the status bar shows the credit"
screen | grep -q "$VAST_API_KEY" && fail "the API key is on the screen"

# 3. every view, by key and by :name
keys 2; wait_screen "Instances: 0" "Instances view (key 2), empty"
keys 3; wait_screen "Leaks" "Leaks view (key 3)"
keys 4; wait_screen "Account" "Account view (key 4)"
keys : ; type_text "offers"; keys Enter; wait_gone "▊  offers" "the command bar closed"
wait_screen "Offers: [0-9]+ shown" "back to Offers with :offers"

# 4. filter: a bad query is shown with its column (the focus stays in the bar to fix it), a good one filters
keys /; type_text "num_gpus=1 reliability>two"; keys Enter
wait_screen "column [0-9]+" "a bad query names its column"
unfiltered=$(screen | grep -oE "Offers: [0-9]+ shown" | head -1)
keys C-u; wait_screen "▊  filter: " "the filter bar cleared (its hint shows)"
type_text "num_gpus=1 reliability>0.9 -o dph+"; keys Enter
wait_gone "column [0-9]+" "the error goes with a good query"
wait_gone "$unfiltered" "a good query filters (was: $unfiltered)"

# 5. mark two offers and rent them: Enter on the dialog cancels (Cancel has the focus); the typed count confirms
keys Escape; keys Space Down Space   # Escape leaves the filter bar for the table
wait_screen "2 marked" "two offers marked"
keys r; wait_screen "Cancel" "the rent dialog"
keys Enter; wait_gone "Cancel +Confirm" "the dialog closed"
wait_screen "Offers: [0-9]+ shown, 2 marked" "Enter cancelled the rent"
keys 2; wait_screen "Instances: 0" "nothing was rented by Enter" 10
keys 1; keys r; wait_screen "Cancel" "the rent dialog again"
type_count 2; keys Enter; wait_gone "Cancel +Confirm" "the dialog closed"
keys 2; wait_screen "Instances: 2" "two instances rented" 60
deadline=$((SECONDS + 120))
until [ "$(screen | grep -c ' running ')" -ge 2 ]; do
  [ $SECONDS -lt $deadline ] || fail "both instances running"
  sleep 0.5
done
echo "ok: both instances running"

# 6. destroy both: mark them, d, type the count
keys Space Down Space
wait_screen "Instances: 2, 2 marked" "both instances marked"
keys d; wait_screen "irreversible" "the destroy dialog says it is irreversible"
type_count 2; keys Enter; wait_gone "Cancel +Confirm" "the dialog closed"
wait_screen "Instances: 0" "both destroyed" 90

# 7. quit, then ask the simulator itself
keys q; wait_screen "console-exited-0" "the console quit cleanly" 20
left=$("$VASTUI" instances --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["instances"]))')
[ "$left" = "0" ] || fail "the simulator still lists $left instance(s)"
echo "ok: the simulator lists 0 instances"
echo "tmux_console: PASSED at ${cols}x${rows}"
