// larson: a server-like pattern after Larson and Krishnan's benchmark
// ("Memory allocation for long-running server applications", ISMM 1998):
// blocks are freed by another thread than the one that allocated them, and
// threads come and go.
//
// -t lanes run at once. Each lane owns an array of -n blocks of random size
// in [-min, -max]. A generation starts one thread per lane; the thread makes
// -i replacements at random positions of its array (free the block there,
// malloc a new one, write its first byte) and exits. The next generation's
// thread of lane j takes over the array of lane j+1 (mod -t): its frees
// release blocks that a thread, now gone, allocated. -g generations. Sizes
// and positions come from xorshift64 with a fixed seed per lane and
// generation, so every run does the same work.
//
// For a profiler this exercises frees on other threads than the allocation
// (counters must still add up) and the retirement of exited threads' slots,
// -t * -g threads in all. Prints nothing unless -v. Exit status: 0, 1 if an
// allocation failed, 2 on bad flags.
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCENARIO "larson"
#include "scenario.h"

struct config {
	long lanes, blocks, iters, gens, min, max;
	uint64_t seed;
	int verbose;
};

// Each lane's state has a cache line of its own, and each thread keeps its
// generator and counters in locals: lanes that shared a line would measure
// false sharing, which moves with wherever the heap happens to put them (one
// 4 KiB block malloc'ed before main moved larson-4t by 30%).
struct lane {
	pthread_t tid;
	const struct config *cfg;
	unsigned char **blocks; // the array this generation's thread works on
	uint64_t state;
	uint64_t checksum;
	int failed;
} __attribute__((aligned(64)));

static void *work(void *arg) {
	struct lane *l = arg;
	const struct config *c = l->cfg;
	unsigned char **blocks = l->blocks;
	uint64_t state = l->state;
	uint64_t span = (uint64_t)(c->max - c->min + 1);
	uint64_t nblocks = (uint64_t)c->blocks;
	long iters = c->iters;
	uint64_t sum = 0;
	int failed = 0;
	for (long i = 0; i < iters; i++) {
		uint64_t r = xorshift64(&state);
		size_t at = (size_t)(r % nblocks);
		unsigned char *old = blocks[at];
		if (old) {
			sum += old[0];
			free(old);
		}
		size_t size = (size_t)c->min + (size_t)((r >> 32) % span);
		unsigned char *p = malloc(size);
		if (!p) {
			blocks[at] = NULL;
			failed = 1;
			break;
		}
		p[0] = (unsigned char)i;
		blocks[at] = p;
	}
	l->checksum += sum;
	l->failed = failed;
	return NULL;
}

// calloc, on a cache line of its own. n * size cannot overflow: the flags
// bound it by 1024 lanes of 64 bytes, or 2^24 blocks of 8.
static void *line_calloc(size_t n, size_t size) {
	size_t bytes = (n * size + 63) & ~(size_t)63;
	void *p = aligned_alloc(64, bytes);
	if (p)
		memset(p, 0, bytes);
	return p;
}

static void usage(FILE *f) {
	fprintf(f,
		"usage: larson [-t lanes] [-n blocks per lane] [-i replacements per thread] [-g generations]\n"
		"              [-min bytes] [-max bytes] [-s seed] [-v]\n"
		"  -t N      lanes, threads at a time (default 4)\n"
		"  -n N      blocks each lane holds (default 1000)\n"
		"  -i N      replacements each thread makes before it exits (default 100000)\n"
		"  -g N      generations: threads started per lane, one after the other (default 10)\n"
		"  -min N    smallest block in bytes (default 16)\n"
		"  -max N    largest block in bytes (default 512)\n"
		"  -s N      seed (default 1)\n"
		"  -v        print the parameters and a checksum on stdout\n");
}

int main(int argc, char **argv) {
	struct config c = {.lanes = 4, .blocks = 1000, .iters = 100000, .gens = 10, .min = 16, .max = 512, .seed = 1};
	static const struct option opts[] = {
		{"t", required_argument, NULL, 't'},   {"n", required_argument, NULL, 'n'},
		{"i", required_argument, NULL, 'i'},   {"g", required_argument, NULL, 'g'},
		{"min", required_argument, NULL, 'm'}, {"max", required_argument, NULL, 'M'},
		{"s", required_argument, NULL, 's'},   {"v", no_argument, NULL, 'v'},
		{"h", no_argument, NULL, 'h'},         {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int o;
	while ((o = getopt_long_only(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 't': c.lanes = parse_long("t", optarg, 1, 1024); break;
		case 'n': c.blocks = parse_long("n", optarg, 1, 1L << 24); break;
		case 'i': c.iters = parse_long("i", optarg, 0, LONG_MAX); break;
		case 'g': c.gens = parse_long("g", optarg, 1, 1L << 20); break;
		case 'm': c.min = parse_long("min", optarg, 1, 1L << 30); break;
		case 'M': c.max = parse_long("max", optarg, 1, 1L << 30); break;
		case 's': c.seed = (uint64_t)parse_long("s", optarg, 0, LONG_MAX); break;
		case 'v': c.verbose = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "larson: unexpected argument %s\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (c.min > c.max) {
		fprintf(stderr, "larson: -min %ld is larger than -max %ld\n", c.min, c.max);
		return 2;
	}

	struct lane *lanes = line_calloc((size_t)c.lanes, sizeof *lanes);
	unsigned char ***arrays = calloc((size_t)c.lanes, sizeof *arrays);
	if (!lanes || !arrays) {
		fprintf(stderr, "larson: out of memory\n");
		return 1;
	}
	for (long j = 0; j < c.lanes; j++) {
		arrays[j] = line_calloc((size_t)c.blocks, sizeof **arrays);
		if (!arrays[j]) {
			fprintf(stderr, "larson: out of memory\n");
			return 1;
		}
	}
	uint64_t sum = 0;
	int failed = 0;
	for (long g = 0; g < c.gens && !failed; g++) {
		for (long j = 0; j < c.lanes; j++) {
			struct lane *l = &lanes[j];
			l->cfg = &c;
			// Generation g of lane j works on the array lane j+g left: from
			// the second generation on, every free releases a block that
			// another, exited thread allocated.
			l->blocks = arrays[(j + g) % c.lanes];
			l->state = seed_for(c.seed, (uint64_t)(g * c.lanes + j));
			int err = pthread_create(&l->tid, NULL, work, l);
			if (err) {
				fprintf(stderr, "larson: pthread_create: %s\n", strerror(err));
				return 1;
			}
		}
		for (long j = 0; j < c.lanes; j++) {
			pthread_join(lanes[j].tid, NULL);
			failed |= lanes[j].failed;
		}
	}
	for (long j = 0; j < c.lanes; j++) {
		sum += lanes[j].checksum;
		for (long k = 0; k < c.blocks; k++)
			free(arrays[j][k]);
		free(arrays[j]);
	}
	free(arrays);
	free(lanes);
	if (failed) {
		fprintf(stderr, "larson: an allocation failed\n");
		return 1;
	}
	if (c.verbose)
		printf("larson: %ld lanes x %ld generations x %ld replacements, %ld blocks per lane, %ld-%ld B, seed %" PRIu64
		       ", checksum %" PRIu64 "\n",
		       c.lanes, c.gens, c.iters, c.blocks, c.min, c.max, c.seed, sum);
	return 0;
}
