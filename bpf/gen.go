package bpf

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type counters -type call -type fn -type event_kind -type map_event -type sample -type sample_free -type sample_frames heap heap.c -- -I/usr/include/x86_64-linux-gnu -mcpu=v3 -Wall -Werror
