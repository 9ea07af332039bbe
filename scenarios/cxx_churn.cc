// cxx_churn: C++ containers churning through operator new and delete.
//
// Each of -t threads keeps a std::map<uint32_t, std::string> of at most -k
// entries: every iteration inserts a random key with a string of random
// length in [-min, -max] (longer than the 15 characters std::string keeps
// inline, so each string is a heap block) and, once the map is full, erases
// the entry at a random key. Every map node and every string goes through
// operator new and operator delete, which libstdc++ implements with malloc
// and free: a profiler that interposes malloc must count them, and this is
// what it costs when it does. Random numbers: xorshift64, fixed seed per
// thread. Prints nothing unless -v. Exit status 0, 2 on bad flags.
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>
#include <map>
#include <string>
#include <thread>
#include <vector>

#define SCENARIO "cxx_churn"
#include "scenario.h"

namespace {

struct Config {
	long threads = 4;
	long iters = 1000000;
	long keep = 1024;
	long min = 16;
	long max = 256;
	uint64_t seed = 1;
	bool verbose = false;
};

uint64_t churn(const Config &c, long index) {
	uint64_t state = seed_for(c.seed, uint64_t(index));
	uint64_t span = uint64_t(c.max - c.min + 1);
	uint64_t sum = 0;
	std::map<uint32_t, std::string> m;
	for (long i = 0; i < c.iters; i++) {
		uint64_t r = xorshift64(&state);
		size_t len = size_t(c.min) + size_t((r >> 32) % span);
		auto [it, inserted] = m.try_emplace(uint32_t(r), len, char('a' + i % 26));
		if (!inserted)
			it->second.assign(len, char('a' + i % 26));
		if (long(m.size()) > c.keep) {
			// Erase the first entry at or after a random key: a random
			// victim without a second container.
			auto victim = m.lower_bound(uint32_t(xorshift64(&state)));
			if (victim == m.end())
				victim = m.begin();
			sum += uint8_t(victim->second[0]);
			m.erase(victim);
		}
	}
	for (auto &kv : m)
		sum += uint8_t(kv.second[0]);
	return sum;
}

void usage(FILE *f) {
	std::fprintf(f,
		"usage: cxx_churn [-t threads] [-i iterations per thread] [-k entries kept] [-min chars] [-max chars]\n"
		"                 [-s seed] [-v]\n"
		"  -t N      threads (default 4)\n"
		"  -i N      inserts per thread (default 1000000)\n"
		"  -k N      entries each thread's map keeps (default 1024)\n"
		"  -min N    shortest string (default 16: above std::string's inline 15)\n"
		"  -max N    longest string (default 256)\n"
		"  -s N      seed (default 1)\n"
		"  -v        print the parameters and a checksum on stdout\n");
}

} // namespace

int main(int argc, char **argv) {
	Config c;
	static const struct option opts[] = {
		{"t", required_argument, nullptr, 't'},   {"i", required_argument, nullptr, 'i'},
		{"k", required_argument, nullptr, 'k'},   {"min", required_argument, nullptr, 'm'},
		{"max", required_argument, nullptr, 'M'}, {"s", required_argument, nullptr, 's'},
		{"v", no_argument, nullptr, 'v'},         {"h", no_argument, nullptr, 'h'},
		{"help", no_argument, nullptr, 'h'},      {nullptr, 0, nullptr, 0},
	};
	int o;
	while ((o = getopt_long_only(argc, argv, "", opts, nullptr)) != -1) {
		switch (o) {
		case 't': c.threads = parse_long("t", optarg, 1, 1024); break;
		case 'i': c.iters = parse_long("i", optarg, 0, LONG_MAX); break;
		case 'k': c.keep = parse_long("k", optarg, 1, 1L << 24); break;
		case 'm': c.min = parse_long("min", optarg, 0, 1L << 24); break;
		case 'M': c.max = parse_long("max", optarg, 0, 1L << 24); break;
		case 's': c.seed = uint64_t(parse_long("s", optarg, 0, LONG_MAX)); break;
		case 'v': c.verbose = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		std::fprintf(stderr, "cxx_churn: unexpected argument %s\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (c.min > c.max) {
		std::fprintf(stderr, "cxx_churn: -min %ld is larger than -max %ld\n", c.min, c.max);
		return 2;
	}
	std::vector<uint64_t> sums(size_t(c.threads));
	std::vector<std::thread> ts;
	for (long t = 0; t < c.threads; t++)
		ts.emplace_back([&c, &sums, t] { sums[size_t(t)] = churn(c, t); });
	uint64_t sum = 0;
	for (long t = 0; t < c.threads; t++) {
		ts[size_t(t)].join();
		sum += sums[size_t(t)];
	}
	if (c.verbose)
		std::printf("cxx_churn: %ld threads x %ld inserts, keep %ld, %ld-%ld chars, seed %llu, checksum %llu\n",
			    c.threads, c.iters, c.keep, c.min, c.max, (unsigned long long)c.seed, (unsigned long long)sum);
	return 0;
}
