// throw.cc: C++ that throws and catches from several threads while it
// allocates, with inlining (-O2): exceptions must unwind through frames
// whose allocations are sampled, and every thread must see its own catch.
// Prints "caught N" with N = threads x rounds.
#include <atomic>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

static std::atomic<long> caught{0};

struct Boom : std::runtime_error {
    std::vector<std::string> why;
    explicit Boom(int depth) : std::runtime_error("boom " + std::to_string(depth)), why(depth, std::string(40, 'x')) {}
};

template <int N> __attribute__((noinline)) int dive(int depth, std::map<int, std::string> &m)
{
    m[depth * N] = std::string(32 + depth, 'a');
    if (depth % 17 == 16)
        throw Boom(depth);
    return depth > 0 ? dive<N>(depth - 1, m) + 1 : 0;
}

static void lane(int seed)
{
    for (int round = 0; round < 2000; round++) {
        std::map<int, std::string> m;
        try {
            dive<3>(16 + (round + seed) % 40, m);
        } catch (const Boom &b) {
            if (!b.why.empty())
                caught++;
        }
    }
}

int main()
{
    std::vector<std::thread> ts;
    for (int i = 0; i < 4; i++)
        ts.emplace_back(lane, i);
    lane(7);
    for (auto &t : ts)
        t.join();
    std::printf("caught %ld\n", caught.load());
    return 0;
}
