#!/usr/bin/env bash
# release/version.sh: the release's version, from git describe, spelled as
# a Debian version so the .deb, the tarball and `heapctl --version` carry
# one string:
#   a tag v1.2.0 on HEAD         1.2.0
#   3 commits past v1.2.0        1.2.0+git3.3c22d87a1b2c   (after 1.2.0)
#   no tag                       0.0.0~git1234.3c22d87a1b2c (before 0.0.0,
#                                so any first tag is newer)
#   changes not committed        ... +dirty appended
#   no git (a tarball's source)  0.0.0~unknown
# Debian's version needs a leading digit and sorts ~ before anything, so a
# bare describe (v1.2.0-3-gabc, or a hash alone) would not do; the commit
# count keeps untagged versions in order, the hash names the commit.
set -euo pipefail
cd "$(dirname "$0")/.."
git rev-parse --git-dir >/dev/null 2>&1 || { echo 0.0.0~unknown; exit 0; }
dirty=
git diff-index --quiet HEAD -- 2>/dev/null || dirty=+dirty
hash=$(git rev-parse --short=12 HEAD)
if d=$(git describe --tags --long --match 'v[0-9]*' 2>/dev/null); then
	# v1.2.0-3-gabc: the tag, the commits since, the hash.
	tag=${d%-*-g*}; n=${d#"$tag"-}; n=${n%%-*}
	v=${tag#v}
	[ "$n" = 0 ] || v=$v+git$n.$hash
else
	v=0.0.0~git$(git rev-list --count HEAD).$hash
fi
echo "$v$dirty"
