#!/usr/bin/env bash
# Run `vastui demo` in a real terminal (tmux, 160x48 or the size given): approve the first rent by key from the
# Offers view (approvals are global: the status bar counts them there), then every other rent from the Campaign
# view, wait for the decision, check the screen shows the decision, the runner-up and "proven gone", quit, and check
# the simulator had zero instances left (the demo's last line and its exit status). Exits non-zero on any miss; the
# last screen is kept in $OUT_DIR.
#
#   scripts/tmux_demo.sh                   # 160x48; uses .venv/bin/vastui, else vastui on PATH
#   scripts/tmux_demo.sh 80x24             # the smallest terminal the console is made for
#   VASTUI=/path/to/vastui DEADLINE_S=300 scripts/tmux_demo.sh
set -euo pipefail

size="${1:-160x48}"
[[ "$size" =~ ^([0-9]+)x([0-9]+)$ ]] || { echo "usage: $0 [COLSxROWS]   (e.g. 80x24; default 160x48)" >&2; exit 2; }
cols="${BASH_REMATCH[1]}"
rows="${BASH_REMATCH[2]}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VASTUI="${VASTUI:-}"
if [[ -z "$VASTUI" ]]; then
  if [[ -x "$here/.venv/bin/vastui" ]]; then VASTUI="$here/.venv/bin/vastui"; else VASTUI="$(command -v vastui)"; fi
fi
DEADLINE_S="${DEADLINE_S:-300}"     # wall seconds for the whole campaign; reached only when something is wrong
SEED="${SEED:-7}"
OUT_DIR="${OUT_DIR:-$(mktemp -d -t vastui-tmux-demo-XXXXXX)}"
session="vastui-demo-$$"
log="$OUT_DIR/demo-output.txt"
status_file="$OUT_DIR/demo.status"
data_dir="$OUT_DIR/data"
mkdir -p "$data_dir"

fail() { echo "tmux_demo: FAIL: $*" >&2; screen > "$OUT_DIR/last-screen.txt" 2>/dev/null || true
         echo "tmux_demo: last screen in $OUT_DIR/last-screen.txt" >&2; exit 1; }
screen() { tmux capture-pane -p -t "$session" -J; }
# the screen as one line: a phrase the console wrapped onto two lines on a narrow terminal is still one phrase
flat() { screen | tr '\n' ' ' | tr -s ' '; }
cleanup() { tmux kill-session -t "$session" 2>/dev/null || true; }
trap cleanup EXIT

# The console needs the pane's terminal; what the demo prints after it closes stays in the pane's history.
tmux new-session -d -s "$session" -x "$cols" -y "$rows" \
  "VASTUI_DATA_DIR='$data_dir' '$VASTUI' demo --seed $SEED; echo \"exit=\$?\" > '$status_file'; sleep 600"
tmux set-option -t "$session" history-limit 5000 >/dev/null

deadline=$(( $(date +%s) + DEADLINE_S ))
approved=0
decided=0
# first from another view: Offers (1); the status bar says "⚑ N TO APPROVE, oldest …" in every view
until grep -q "Approvals:" <<<"$(screen)"; do
  (( $(date +%s) < deadline )) || fail "the console did not open"
  sleep 0.5
done
until grep -q "Offers:" <<<"$(screen)"; do   # a key sent while the terminal still starts up may be lost
  tmux send-keys -t "$session" 1
  (( $(date +%s) < deadline )) || fail "the Offers view did not open"
  sleep 1
done
until grep -q "TO APPROVE, oldest" <<<"$(screen)"; do
  [[ -s "$status_file" ]] && fail "the demo ended before its first approval: $(cat "$status_file")"
  (( $(date +%s) < deadline )) || fail "no pending approval counted on the Offers view's status bar"
  sleep 0.5
done
grep -q "Approvals:" <<<"$(screen)" && fail "the console did not stay on the Offers view"
tmux send-keys -t "$session" a
approved=$((approved + 1))
until grep -q "approved r[0-9]" <<<"$(screen)"; do
  (( $(date +%s) < deadline )) || fail "the approval from the Offers view was not taken"
  sleep 0.3
done
screen > "$OUT_DIR/approved-from-offers.txt"
tmux send-keys -t "$session" 5
while (( $(date +%s) < deadline )); do
  [[ -s "$status_file" ]] && fail "the demo ended before its decision: $(cat "$status_file")"
  text="$(flat)"
  if grep -q "Approvals: [0-9]* pending" <<<"$text"; then
    tmux send-keys -t "$session" a
    approved=$((approved + 1))
  fi
  if grep -q "Decision: c" <<<"$text" && grep -q "runner-up" <<<"$text" && grep -q "finished (clean)" <<<"$text"; then
    decided=1
    break
  fi
  sleep 0.5
done
(( decided )) || fail "no decision with runner-up and 'finished (clean)' on screen within ${DEADLINE_S}s"
(( approved > 0 )) || fail "no approval was asked on screen"
# The cleanup table is the view's last part: on a short terminal the view scrolls, and focusing the table (Tab from
# the approvals, past the candidates) brings it into sight, as an operator would.
tmux send-keys -t "$session" Tab
sleep 0.3
tmux send-keys -t "$session" Tab
until grep -q "proven gone" <<<"$(screen)"; do
  (( $(date +%s) < deadline )) || fail "no 'proven gone' in the cleanup table"
  sleep 0.5
done
text="$(screen)"
screen > "$OUT_DIR/decision-screen.txt"
if grep -q "not yet proven\| alive " <<<"$text"; then fail "an instance is not proven gone on the final screen"; fi

tmux send-keys -t "$session" q
while (( $(date +%s) < deadline )) && [[ ! -s "$status_file" ]]; do sleep 0.5; done
[[ -s "$status_file" ]] || fail "the demo did not exit after q"
grep -q "^exit=0$" "$status_file" || fail "the demo exited with $(cat "$status_file")"
tmux capture-pane -p -J -S - -t "$session" > "$log"
grep -q "the simulator lists 0 instance(s) after the campaign" "$log" || fail "the simulator did not end with zero instances"
echo "tmux_demo: OK at ${cols}x${rows} — $approved approval key(s) (the first from the Offers view), decision and runner-up shown, every instance proven gone, simulator lists 0 (screens in $OUT_DIR)"
