#!/usr/bin/env bash
# Issue #47's "kills and faults" figures: runs the `faults` tests (tests/integration/faults_test.cpp:
# `run`, `batch` and `serve` killed with SIGKILL and resumed; a full disk; a read-only database;
# a damaged cubin cache; the driver and NVRTC out of memory) and the merge kill test
# (tests/db/merge_test.cpp, Merge.AKillDuringTheMergeLeavesOutAsItWasOrFullyMerged), and writes
# what they counted as Markdown: kills survived by command and phase, measurements lost, faults
# injected and survived, with the machine, date, commit and this command.
#   bash bench/run_reliability.sh [BUILD] [OUT.md]
# BUILD (default build/) must have faults_test, db_test, gputune, fake_cuda and nvrtc_faults
# built. Run as root for the full-disk test (it mounts a tmpfs; it skips otherwise).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=${2:-}
for t in tests/faults_test tests/db_test gputune; do
  [ -x "$build/$t" ] || { echo "no $build/$t: make faults_test db_test" >&2; exit 2; }
done
work=$(mktemp -d /tmp/gputune-reliability.XXXXXX)
trap 'rm -rf "$work"' EXIT
log=$work/tally.txt
: >"$log"
start=$(date +%s)
GPUTUNE_FAULTS_LOG=$log "$build/tests/faults_test" >"$work/faults.txt" 2>&1
faults_rc=$?
"$build/tests/db_test" --gtest_filter='Merge.AKillDuringTheMergeLeavesOutAsItWasOrFullyMerged' \
  >"$work/merge.txt" 2>&1
merge_rc=$?
seconds=$(($(date +%s) - start))
merge_line=$(grep -o 'kills that left OUT as it was: [0-9]*, fully merged: [0-9]*' "$work/merge.txt")
m_before=$(sed -E 's/.*as it was: ([0-9]+),.*/\1/' <<<"$merge_line")
m_after=$(sed -E 's/.*fully merged: ([0-9]+).*/\1/' <<<"$merge_line")

python3 - "$log" "$work/faults.txt" "$faults_rc" "$merge_rc" "${m_before:-0}" "${m_after:-0}" \
  "$seconds" "$root" "$build" >"$work/report.md" <<'PY'
import platform, re, subprocess, sys, datetime, os
log, faults_out, faults_rc, merge_rc, m_before, m_after, seconds, root, build = sys.argv[1:]
lines = [l.split() for l in open(log) if l.strip()]
def cpu():
    for l in open("/proc/cpuinfo"):
        if l.startswith("model name"): return l.split(":", 1)[1].strip()
    return platform.processor()
commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
text = open(faults_out).read()
summary = re.findall(r"\[\s+(OK|FAILED|SKIPPED)\s+\] (Faults\.\S+) \((\d+) ms\)", text)
kills = {}
for w in lines:
    if w[0] == "kill":
        kills[(w[1], " ".join(w[2:-1]))] = kills.get((w[1], " ".join(w[2:-1])), 0) + int(w[-1])
kills[("db merge", "during the merge transaction (OUT as it was)")] = int(m_before)
kills[("db merge", "at its end, or after it ended (OUT fully merged; the test's last kill comes at 1.5x the merge's time)")] = int(m_after)
lost = {w[1]: int(w[2]) for w in lines if w[0] == "lost"}
faults = [" ".join(w[1:]) for w in lines if w[0] == "fault"]
resumed = [" ".join(w[1:]) for w in lines if w[0] == "batch"]
messages = [l.split(" ", 1)[1].strip() for l in open(log) if l.startswith("message ")]
print("# Reliability: kills and faults (issue #47), VM, %s\n" % datetime.date.today().isoformat())
print("Machine: %s, %d cores, %s; no GPU (the fake driver, tests/fake_cuda, stands in: orchestration only)." %
      (cpu(), os.cpu_count(), platform.platform()))
print("Commit: %s%s. Command: `bash bench/run_reliability.sh %s` (%s s in all).\n" %
      (commit, " (with uncommitted changes)" if dirty else "", os.path.relpath(build, root), seconds))
print("faults_test exit %s, merge kill test exit %s.\n" % (faults_rc, merge_rc))
print("## Kills (SIGKILL)\n")
print("| command | when / what was killed | kills |\n|---|---|---:|")
total = 0
for (cmd, phase), n in kills.items():
    print("| `gputune %s` | %s | %d |" % (cmd, phase or "-", n)); total += n
print("| **all** | | **%d** |\n" % total)
print("After every kill `PRAGMA integrity_check` said ok and the stored measurements were at least "
      "as many as just before the kill; after the resumes (`run --resume`, the suite again and each "
      "unfinished run resumed, a restarted server requeueing its job) every (context, configuration) "
      "of every run was measured exactly once, re-measurements once. A merge killed midway left OUT "
      "as it was or fully merged, and merging again completed it.\n")
print("Measurements lost: %s (by command: %s).\n" % (sum(lost.values()) if lost else "not counted",
      ", ".join("%s %d" % kv for kv in lost.items()) or "-"))
if resumed: print("Batch: " + "; ".join(resumed) + ".\n")
print("## Faults injected\n")
for f in faults: print("- " + f)
if messages:
    print("\nWhat the user is told (full disk, read-only file, read-only folder):\n")
    for m in messages: print("    " + m)
print("\n## Tests\n")
print("| test | result | ms |\n|---|---|---:|")
for status, name, ms in summary: print("| %s | %s | %s |" % (name, status, ms))
PY
cat "$work/report.md"
[ -n "$out" ] && cp "$work/report.md" "$out"
[ "$faults_rc" = 0 ] && [ "$merge_rc" = 0 ]
