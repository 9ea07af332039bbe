# bench/otlp-setup.sh, sourced by the benchmarks of export's OTLP push
# (export-scale.sh, otlp-cost.sh): the same start for both.
#   otlp_private VAR "$@"  re-runs the script in a mount namespace of its
#                          own, on a /dev/shm of its own, so that the
#                          processes it starts leave nothing in the
#                          machine's; export still sees every process's
#                          region (a container's too), so the scripts name
#                          theirs with --pid "$(otlp_pids)".
#   otlp_setup             builds, finds the Collector the tests built,
#                          makes $work, and kills what pids and shimmed
#                          hold at exit.
#   otlp_collector OUT     starts that Collector writing to OUT; sets port.
#   cpu PID                utime+stime of PID in clock ticks.
# shellcheck shell=bash

otlp_private() {
	local var=$1
	shift
	if [ -z "${!var:-}" ]; then
		# shellcheck disable=SC2016 # "$0" "$@" are the inner shell's
		exec unshare -m bash -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && export '"$var"'=1 && exec "$0" "$@"' "$0" "$@"
	fi
}

otlp_setup() {
	make -s all >/dev/null
	col=
	for f in /var/cache/heapline/otelcol-*; do # the newest build
		case $f in *.tmp*) continue ;; esac
		if [ -x "$f" ] && { [ -z "$col" ] || [ "$f" -nt "$col" ]; }; then col=$f; fi
	done
	[ -x "$col" ] || { echo "no Collector in /var/cache/heapline: run go test ./ctl -run TestExportOTLPSites first" >&2; exit 1; }
	work=$(mktemp -d)
	pids=()
	shimmed=()
	trap otlp_cleanup EXIT
}

otlp_cleanup() {
	for p in "${pids[@]}" "${shimmed[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}

# otlp_pids: the shimmed processes, as export's --pid takes them.
otlp_pids() { (IFS=,; echo "${shimmed[*]}"); }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

otlp_collector() {
	port=$(free_port)
	cat >"$work/col.yaml" <<Y
receivers: {otlp: {protocols: {http: {endpoint: "127.0.0.1:$port"}}}}
exporters: {file: {path: "$1"}}
service: {pipelines: {profiles: {receivers: [otlp], exporters: [file]}}}
Y
	"$col" --config "file:$work/col.yaml" --feature-gates=service.profilesSupport 2>"$work/col.log" &
	pids+=($!)
}

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # clock ticks
