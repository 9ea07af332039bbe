#!/usr/bin/env bash
# history-publish.sh: add overhead results to the history, redraw the
# performance page, and check the newest points against the ones before.
#
#   bench/history-publish.sh --store DIR RESULT.json...  # a local store: add, render, check in DIR
#   bench/history-publish.sh --push RESULT.json...       # the bench-data branch of origin (CI)
#   bench/history-publish.sh --dry-run RESULT.json...    # as --push on a copy of the branch, no push
#
# RESULT.json is the output of `heapctl overhead --json` (bench/history-measure.sh
# writes cpu.json and instructions.json). A file named vs-TAG.json compares the
# library with release TAG (bench/history-release.sh) and is added with --vs TAG.
#
# --push works in the git checkout of the current directory. The store
# (points.jsonl) and the page (README.md, one SVG per scenario) live at the
# root of the bench-data branch. No point is ever lost when several jobs
# publish at once: each attempt starts from the branch's tip as fetched,
# adds this job's points to it with `heapctl history add`, renders, commits
# and pushes without force. A push that raced another one is refused as not
# a fast-forward, and the next attempt starts again from the new tip, so
# the other job's points are kept and ours are added after them: no merge,
# so no conflict in an append-only file.
#
# Environment: HEAPCTL (default bin/heapctl beside this script's project),
# REMOTE (origin), BRANCH (bench-data), COMMIT and REF (the commit and ref
# measured; default: the result's library stamp, else git's HEAD and ref),
# COMMIT_URL (links commits on the page), CHECK_K (10), CHECK_THRESHOLD
# (0.005: the instruction figure's largest allowed rise), ATTEMPTS (push attempts, 10), GITHUB_STEP_SUMMARY (the check's
# table is appended to it when set).
#
# Exit status: 0, or 1 when the check finds a regression (after the points
# are stored and pushed: a regression is recorded, not dropped); 2 on usage
# errors or when the points could not be stored.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
HEAPCTL=${HEAPCTL:-$root/bin/heapctl}
REMOTE=${REMOTE:-origin}
BRANCH=${BRANCH:-bench-data}
ATTEMPTS=${ATTEMPTS:-10}

usage() {
	sed -n '2,6s/^# \{0,1\}//p' "$0" >&2
	exit 2
}
die() {
	echo "history-publish: $*" >&2
	exit 2
}

mode='' store=''
while [ $# -gt 0 ]; do
	case $1 in
	--store)
		[ $# -ge 2 ] || usage
		mode=local store=$2
		shift 2
		;;
	--push) mode=push && shift ;;
	--dry-run) mode=dry-run && shift ;;
	--) shift && break ;;
	-h | --help) usage ;;
	-*) die "unknown option $1" ;;
	*) break ;;
	esac
done
if [ -z "$mode" ] || [ $# -eq 0 ]; then usage; fi
[ -x "$HEAPCTL" ] || die "no heapctl at $HEAPCTL (make, or set HEAPCTL)"

results=()
for f in "$@"; do
	[ -f "$f" ] || die "no result file $f"
	results+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")")
done

# add_all STORE: every result into STORE; plain results in one batch (one
# locked write), each vs-TAG.json with --vs TAG.
add_all() {
	local store=$1 f base
	local meta=() plain=()
	if [ -n "${COMMIT:-}" ]; then meta+=(--commit "$COMMIT"); fi
	if [ -n "${REF:-}" ]; then meta+=(--ref "$REF"); fi
	for f in "${results[@]}"; do
		base=$(basename "$f" .json)
		case $base in
		vs-?*) "$HEAPCTL" history add --store "$store" "${meta[@]}" --vs "${base#vs-}" "$f" || return ;;
		*) plain+=("$f") ;;
		esac
	done
	if [ ${#plain[@]} -gt 0 ]; then
		"$HEAPCTL" history add --store "$store" "${meta[@]}" "${plain[@]}" || return
	fi
}

render() {
	local link=()
	if [ -n "${COMMIT_URL:-}" ]; then link=(--commit-url "$COMMIT_URL"); fi
	"$HEAPCTL" history render --store "$1" --out-dir "$1" "${link[@]}"
}

# check STORE: the check's table on stdout and in the job summary; its
# status is the script's.
check() {
	local status=0 summary
	summary=$(mktemp)
	"$HEAPCTL" history check --store "$1" -k "${CHECK_K:-10}" --threshold "${CHECK_THRESHOLD:-0.005}" >"$summary" || status=$?
	cat "$summary"
	if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$summary" >>"$GITHUB_STEP_SUMMARY"; fi
	rm -f "$summary"
	return "$status"
}

if [ "$mode" = local ]; then
	add_all "$store" || exit 2
	render "$store" || exit 2
	check "$store"
	exit
fi

# --push / --dry-run: a worktree of our own for the branch, removed at exit.
git rev-parse --git-dir >/dev/null 2>&1 || die "--$mode needs a git checkout (run it from the project)"
tmp=$(mktemp -d)
wt=$tmp/$BRANCH
cleanup() {
	git worktree remove --force "$wt" >/dev/null 2>&1 || true
	git worktree prune
	rm -rf "$tmp"
}
trap cleanup EXIT
ident=(-c "user.name=${GIT_COMMITTER_NAME:-heapline-bench}" -c "user.email=${GIT_COMMITTER_EMAIL:-heapline-bench@users.noreply.github.com}")

stored=
for attempt in $(seq 1 "$ATTEMPTS"); do
	# The branch's tip as it is now; absent before the first publish.
	parent=()
	rc=0
	git ls-remote --exit-code --heads "$REMOTE" "$BRANCH" >/dev/null || rc=$?
	case $rc in
	0)
		if ! git fetch -q "$REMOTE" "+refs/heads/$BRANCH:refs/remotes/$REMOTE/$BRANCH"; then
			sleep $((attempt * 2))
			continue
		fi
		start=refs/remotes/$REMOTE/$BRANCH
		parent=(-p "$(git rev-parse "$start")")
		;;
	2) start=HEAD ;; # no such branch yet: start it empty
	*)
		echo "history-publish: cannot reach $REMOTE (attempt $attempt)" >&2
		sleep $((attempt * 2))
		continue
		;;
	esac
	git worktree remove --force "$wt" >/dev/null 2>&1 || true
	git worktree add -q --detach "$wt" "$start" || exit 2
	if [ ${#parent[@]} -eq 0 ]; then
		git -C "$wt" rm -rfq --ignore-unmatch . && git -C "$wt" clean -fdxq || exit 2
	fi

	added=$(add_all "$wt") || exit 2
	echo "$added"
	render "$wt" >/dev/null || exit 2
	git -C "$wt" add -A .
	tree=$(git -C "$wt" write-tree)
	# "overhead history: added 4 points (commit 0123abc)", one line per add.
	commit=$(git "${ident[@]}" -C "$wt" commit-tree "$tree" "${parent[@]}" \
		-m "overhead history: $(echo "$added" | sed 's/ to .*$//' | paste -sd ';' -)")

	if [ "$mode" = dry-run ]; then
		echo "history-publish: dry run: $BRANCH would become $commit" >&2
		stored=1
		break
	fi
	if git push -q "$REMOTE" "$commit:refs/heads/$BRANCH"; then
		echo "history-publish: pushed $BRANCH $commit (attempt $attempt)" >&2
		stored=1
		break
	fi
	# Someone else pushed first: start again from their tip.
	echo "history-publish: push refused (attempt $attempt of $ATTEMPTS); refetching" >&2
	sleep $((attempt + RANDOM % 3))
done
[ -n "$stored" ] || die "could not push to $REMOTE $BRANCH after $ATTEMPTS attempts"

check "$wt"
