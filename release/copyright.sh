#!/usr/bin/env bash
# release/copyright.sh HEAPCTL: the .deb's /usr/share/doc/heapline/copyright
# on stdout. heapctl is a static Go program: besides heapline's own code it
# carries the Go modules its build lists (go version -m), and each one's
# license text goes with it, read from the module cache that built it.
set -euo pipefail
heapctl=${1:?usage: copyright.sh HEAPCTL}
cat <<'HEAD'
heapline: exact heap counters for any Linux program.
Source: https://github.com/heapline/heapline

heapline's own code (libheap.so, heapline-rusage, and heapctl's own
packages): Copyright 2026 the heapline developers. The sources state no
license of their own yet.

heapctl also contains the Go standard library and the Go modules below,
each under the license that follows its name.
HEAD
modcache=$(go env GOMODCACHE)
goroot=$(go env GOROOT)
printf '\n==== Go %s (the standard library and runtime)\n\n' "$(go env GOVERSION)"
cat "$goroot/LICENSE"
go version -m "$heapctl" | awk '$1 == "dep" { print $2, $3 }' | while read -r path version; do
	# The module cache spells capitals as ! and their lower case.
	dir=$modcache/$(printf '%s' "$path" | sed -E 's/([A-Z])/!\L\1/g')@$version
	licenses=$(find "$dir" -maxdepth 1 -type f \( -iname 'LICENSE*' -o -iname 'COPYING*' -o -iname 'NOTICE*' \) 2>/dev/null | sort)
	if [ -z "$licenses" ]; then
		echo "copyright.sh: $path $version: no license file in $dir" >&2
		exit 1
	fi
	printf '\n==== %s %s\n' "$path" "$version"
	for f in $licenses; do
		printf '\n'
		cat "$f"
	done
done
