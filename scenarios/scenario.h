/*
 * scenario.h: what the scenario programs share (C and C++): the random
 * numbers that make every run ask for the same sizes in the same order, and
 * strict flag parsing. Define SCENARIO (the program's name, for messages)
 * before including it.
 */
#ifndef HEAPLINE_SCENARIO_H
#define HEAPLINE_SCENARIO_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef SCENARIO
#error "define SCENARIO before including scenario.h"
#endif

// xorshift64 (Marsaglia 2003): three shifts per number, no multiplication,
// cheap next to the malloc it feeds.
static inline uint64_t xorshift64(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

// seed_for spreads seed and a stream's index (a thread, a lane and
// generation) through splitmix64 into a well-mixed, never-zero state, so
// that neighbouring streams do not draw correlated numbers.
static inline uint64_t seed_for(uint64_t seed, uint64_t index)
{
	uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return z ? z : 1;
}

// parse_long accepts a whole decimal number in [lo, hi] or exits with
// status 2 naming the flag.
static inline long parse_long(const char *flag, const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < lo || v > hi) {
		fprintf(stderr, SCENARIO ": -%s %s: want a whole number in [%ld, %ld]\n", flag, s, lo, hi);
		exit(2);
	}
	return v;
}

#endif
