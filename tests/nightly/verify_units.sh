#!/usr/bin/env bash
# Owns: the check of configs/nightly (ctest NightlyConfigs.*): the systemd service and timer pass
# `systemd-analyze verify` (skipped, exit 77, where systemd-analyze is not installed), and every
# gputune command line in them and in the crontab is one `gputune batch` accepts (run with
# --slurm and no --submit, which loads the suite and writes the scripts but tunes nothing).
# Must not: install or start the units, or touch anything outside its temp folder.
#   verify_units.sh SOURCE_DIR GPUTUNE_BINARY units|commands
set -euo pipefail
src=$1 gputune=$2 what=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nightly="$src/configs/nightly"
case "$what" in
  units)
    command -v systemd-analyze >/dev/null || { echo "systemd-analyze is not installed: not checked"; exit 77; }
    # The units as a user installs them, with the binary this build made.
    for u in gputune-nightly.service gputune-nightly.timer; do
      sed "s|/usr/local/bin/gputune|$gputune|g" "$nightly/$u" >"$tmp/$u"
    done
    (cd "$tmp" && systemd-analyze verify --man=no gputune-nightly.service gputune-nightly.timer)
    echo "systemd-analyze verify: the service and the timer are valid"
    ;;
  commands)
    # Every command line (commented variants too), with this build, the repo's suite and a
    # database in the temp folder, and --slurm (without --submit) so that nothing is tuned.
    n=0
    while IFS= read -r line; do
      line=${line#\#}
      line=${line# }
      line=${line#ExecStart=}
      line=${line#'0 2 * * * '}
      line=${line#flock -n /var/lib/gputune/nightly.lock }
      line=${line%%>>*}
      line=${line//'${GPUTUNE_SUITE}'//usr/local/share/gputune/suites/examples.json}
      line=${line//'${GPUTUNE_DB}'//var/lib/gputune/nightly.db}
      line=${line//\/usr\/local\/share\/gputune\/suites\/examples.json/$src/configs/suites/examples.json}
      line=${line//\/shared\/gputune\/suites\/examples.json/$src/configs/suites/examples.json}
      line=${line//\/var\/lib\/gputune\/nightly.db/$tmp/n$n.db}
      line=${line//\/shared\/gputune\/nightly.db/$tmp/n$n.db}
      line=${line/--submit/}
      read -r -a words <<<"$line"
      [ "${words[0]}" = /usr/local/bin/gputune ] || { echo "not a gputune line: $line" >&2; exit 1; }
      words[0]=$gputune
      [[ " ${words[*]} " == *" --slurm "* ]] || words+=(--slurm)
      echo "+ ${words[*]}"
      "${words[@]}" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
      n=$((n + 1))
    done < <(grep -h '/usr/local/bin/gputune' "$nightly/gputune-nightly.service" "$nightly/crontab")
    [ "$n" -ge 4 ] || { echo "expected 4 command lines, found $n" >&2; exit 1; }
    echo "$n command lines accepted"
    ;;
  *) echo "verify_units.sh: $what: give units or commands" >&2; exit 2 ;;
esac
