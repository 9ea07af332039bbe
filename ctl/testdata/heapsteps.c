/*
 * heapsteps: a heap that grows and shrinks in known steps, for the tests of
 * heapctl record, watch and export (the tests in ctl/ compile it).
 *
 *   heapsteps CTL [STEPS [STEP_KIB]]
 *
 * Grows by STEPS steps of STEP_KIB KiB (default 4 steps of 8 MiB), each step
 * made of 64 KiB blocks (below glibc's mmap threshold, so they come from the
 * heap), then frees them back a step at a time, last step first. After
 * setting up and after each step it prints one line on stdout and waits:
 *
 *   pid 4711                  once, first
 *   base                      nothing of ours allocated yet
 *   up 1 8389632              step 1 allocated: our live usable bytes now
 *   ...
 *   down 1 0                  ...until everything is freed again
 *   done
 *
 * The byte counts are sums of malloc_usable_size, exactly what the shim
 * counts, so a reader of the region sees its base plus that number.
 * CTL says how to wait: a number is milliseconds to hold each step; a path
 * (a fifo) is read for one line before going on, which lets a test wait
 * until its sampler has seen a step, whatever the machine's speed.
 *
 * Output goes through write(2) and input through read(2): stdio would
 * allocate its buffers in the middle of the steps.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (64 << 10)
#define MAXSTEPS 16
#define MAXBLOCKS 4096

static void *blocks[MAXSTEPS][MAXBLOCKS];
static size_t usable[MAXSTEPS];
static int ctlfd = -1;
static long hold_ms;

static void say(const char *fmt, long a, size_t b)
{
    char buf[128];
    int n = snprintf(buf, sizeof buf, fmt, a, b);
    if (write(1, buf, n) != n)
        _exit(3);
}

static void wait_step(void)
{
    if (ctlfd < 0) {
        struct timespec ts = {hold_ms / 1000, (hold_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        return;
    }
    char c;
    for (;;) {
        ssize_t r = read(ctlfd, &c, 1);
        if (r <= 0)
            _exit(r == 0 ? 0 : 4); /* the test went away: stop */
        if (c == '\n')
            return;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        static const char usage[] = "usage: heapsteps MS|FIFO [STEPS [STEP_KIB]]\n";
        write(2, usage, sizeof usage - 1);
        return 2;
    }
    char *end;
    hold_ms = strtol(argv[1], &end, 10);
    if (*end != '\0') {
        ctlfd = open(argv[1], O_RDONLY);
        if (ctlfd < 0) {
            perror(argv[1]);
            return 2;
        }
    }
    int steps = argc > 2 ? atoi(argv[2]) : 4;
    long step_kib = argc > 3 ? atol(argv[3]) : 8 << 10;
    long nblocks = step_kib / (BLOCK >> 10);
    if (steps < 1 || steps > MAXSTEPS || nblocks < 1 || nblocks > MAXBLOCKS) {
        static const char bad[] = "heapsteps: STEPS 1..16, STEP_KIB 64..262144\n";
        write(2, bad, sizeof bad - 1);
        return 2;
    }

    say("pid %ld\n", (long)getpid(), 0);
    say("base\n", 0, 0);
    wait_step();
    size_t total = 0;
    for (int s = 0; s < steps; s++) {
        for (long i = 0; i < nblocks; i++) {
            blocks[s][i] = malloc(BLOCK);
            if (!blocks[s][i])
                return 5;
            memset(blocks[s][i], s + 1, BLOCK); /* a real heap is touched */
            usable[s] += malloc_usable_size(blocks[s][i]);
        }
        total += usable[s];
        say("up %ld %zu\n", s + 1, total);
        wait_step();
    }
    for (int s = steps - 1; s >= 0; s--) {
        for (long i = 0; i < nblocks; i++)
            free(blocks[s][i]);
        total -= usable[s];
        say("down %ld %zu\n", s, total);
        wait_step();
    }
    say("done\n", 0, 0);
    wait_step();
    return 0;
}
