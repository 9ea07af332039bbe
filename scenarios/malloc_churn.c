// malloc_churn: the allocation pattern heapctl overhead measures.
//
// Each of -t threads keeps -k blocks (default 64) and replaces them in turn:
// free the oldest, malloc a block of pseudo-random size in [-min, -max] and
// write its first byte (every byte with -w). Sizes come from a xorshift64
// generator with a fixed seed per thread, so every run asks for the same
// sizes in the same order. -r MiB allocates and touches that much before the
// threads start and holds it until the end: a process with a large resident
// heap, like a simulation with its arrays. Everything is freed at the end.
//
// The program prints nothing unless -v is given, so its output cannot
// perturb a timing. Exit status: 0, 1 if an allocation failed, 2 on bad
// flags.
//
// Parameters of each named scenario: docs/methodology.md.
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SCENARIO "malloc_churn"
#include "scenario.h"

struct config {
	long threads;
	long iters;
	long min, max;
	long keep;
	long resident_mib;
	int write_all;
	uint64_t seed;
	int verbose;
};

struct worker {
	pthread_t tid;
	const struct config *cfg;
	long index;
	uint64_t checksum;
	int failed;
};

static void *churn(void *arg) {
	struct worker *w = arg;
	const struct config *c = w->cfg;
	uint64_t state = seed_for(c->seed, (uint64_t)w->index);
	uint64_t span = (uint64_t)(c->max - c->min + 1);
	uint64_t sum = 0;
	unsigned char **blocks = calloc((size_t)c->keep, sizeof *blocks);
	if (!blocks) {
		w->failed = 1;
		return NULL;
	}
	long slot = 0;
	for (long i = 0; i < c->iters; i++) {
		unsigned char *old = blocks[slot];
		if (old) {
			// Read the block before freeing it: the compiler cannot drop
			// a malloc whose contents are observed.
			sum += old[0];
			free(old);
		}
		size_t size = (size_t)(c->min + (long)(xorshift64(&state) % span));
		unsigned char *p = malloc(size);
		if (!p) {
			w->failed = 1;
			blocks[slot] = NULL;
			break;
		}
		if (c->write_all)
			memset(p, (int)(i & 0xff), size);
		else
			p[0] = (unsigned char)i;
		blocks[slot] = p;
		if (++slot == c->keep)
			slot = 0;
	}
	for (long j = 0; j < c->keep; j++) {
		if (blocks[j])
			sum += blocks[j][0];
		free(blocks[j]);
	}
	free(blocks);
	w->checksum = sum;
	return NULL;
}

static void usage(FILE *f) {
	fprintf(f,
		"usage: malloc_churn [-t threads] [-i iterations per thread] [-min bytes] [-max bytes]\n"
		"                    [-k blocks kept per thread] [-r resident MiB] [-w] [-s seed] [-v]\n"
		"  -t N      threads (default 1)\n"
		"  -i N      malloc+free pairs per thread (default 1000000)\n"
		"  -min N    smallest block in bytes (default 16)\n"
		"  -max N    largest block in bytes (default 512)\n"
		"  -k N      blocks each thread keeps (default 64)\n"
		"  -r MiB    allocate and touch this much first, hold it until the end (default 0)\n"
		"  -w        write every byte of each block, not only the first\n"
		"  -s N      seed of the size generator (default 1)\n"
		"  -v        print the parameters and a checksum on stdout\n");
}

int main(int argc, char **argv) {
	struct config c = {
		.threads = 1, .iters = 1000000, .min = 16, .max = 512, .keep = 64, .seed = 1,
	};
	// getopt_long_only: "-min 16" and "--min=16" both work, like the
	// flags of heapctl.
	static const struct option opts[] = {
		{"t", required_argument, NULL, 't'},   {"i", required_argument, NULL, 'i'},
		{"min", required_argument, NULL, 'm'}, {"max", required_argument, NULL, 'M'},
		{"k", required_argument, NULL, 'k'},   {"r", required_argument, NULL, 'r'},
		{"w", no_argument, NULL, 'w'},         {"s", required_argument, NULL, 's'},
		{"v", no_argument, NULL, 'v'},         {"h", no_argument, NULL, 'h'},
		{"help", no_argument, NULL, 'h'},      {NULL, 0, NULL, 0},
	};
	int o;
	while ((o = getopt_long_only(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 't': c.threads = parse_long("t", optarg, 1, 1024); break;
		case 'i': c.iters = parse_long("i", optarg, 0, LONG_MAX); break;
		case 'm': c.min = parse_long("min", optarg, 1, 1L << 40); break;
		case 'M': c.max = parse_long("max", optarg, 1, 1L << 40); break;
		case 'k': c.keep = parse_long("k", optarg, 1, 1L << 24); break;
		case 'r': c.resident_mib = parse_long("r", optarg, 0, 1L << 20); break;
		case 'w': c.write_all = 1; break;
		case 's': c.seed = (uint64_t)parse_long("s", optarg, 0, LONG_MAX); break;
		case 'v': c.verbose = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "malloc_churn: unexpected argument %s\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (c.min > c.max) {
		fprintf(stderr, "malloc_churn: -min %ld is larger than -max %ld\n", c.min, c.max);
		return 2;
	}

	// The resident hold: one large block, every page written so that it is
	// really resident, not only reserved.
	unsigned char *resident = NULL;
	size_t resident_bytes = (size_t)c.resident_mib << 20;
	if (resident_bytes) {
		resident = malloc(resident_bytes);
		if (!resident) {
			fprintf(stderr, "malloc_churn: cannot allocate -r %ld MiB\n", c.resident_mib);
			return 1;
		}
		long page = sysconf(_SC_PAGESIZE);
		for (size_t off = 0; off < resident_bytes; off += (size_t)page)
			resident[off] = (unsigned char)off;
	}

	struct worker *ws = calloc((size_t)c.threads, sizeof *ws);
	if (!ws) {
		fprintf(stderr, "malloc_churn: out of memory\n");
		return 1;
	}
	// Every worker runs on its own thread, even with -t 1, so one thread
	// and four threads take the same code path (a non-main arena in glibc).
	for (long t = 0; t < c.threads; t++) {
		ws[t].cfg = &c;
		ws[t].index = t;
		int err = pthread_create(&ws[t].tid, NULL, churn, &ws[t]);
		if (err) {
			fprintf(stderr, "malloc_churn: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	uint64_t sum = 0;
	int failed = 0;
	for (long t = 0; t < c.threads; t++) {
		pthread_join(ws[t].tid, NULL);
		sum += ws[t].checksum;
		failed |= ws[t].failed;
	}
	free(ws);
	if (resident) {
		sum += resident[resident_bytes / 2];
		free(resident);
	}
	if (failed) {
		fprintf(stderr, "malloc_churn: an allocation failed\n");
		return 1;
	}
	if (c.verbose)
		printf("malloc_churn: %ld threads x %ld iterations, %ld-%ld B, keep %ld, resident %ld MiB%s, seed %" PRIu64
		       ", checksum %" PRIu64 "\n",
		       c.threads, c.iters, c.min, c.max, c.keep, c.resident_mib, c.write_all ? ", written fully" : "", c.seed, sum);
	return 0;
}
