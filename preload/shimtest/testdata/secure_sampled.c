/* secure_sampled.c: a setuid-root program, as TestSetuidSampler builds
 * it. It makes and frees argv[1] blocks of argv[2] bytes, then reads what
 * the shim sampled from its own region (/dev/shm/heapline.<pid>, root's
 * and so its own), and prints the region's mean and its samples: the
 * stack table's raw counts and those that found no room. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "region.h"

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    long n = atol(argv[1]), size = atol(argv[2]);
    for (long i = 0; i < n; i++) {
        volatile char *p = malloc((size_t)size);
        p[0] = 1;
        free((void *)p);
    }
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/heapline.%d", (int)getpid());
    int fd = open(path, O_RDONLY);
    struct hl_header h;
    if (fd < 0 || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        perror(path);
        return 1;
    }
    unsigned long long samples = h.samples_lost;
    for (uint32_t i = 0; i < h.stacks_used && i < h.nstacks; i++) {
        struct hl_stack s;
        if (pread(fd, &s, sizeof s, (off_t)(h.prof_offset + i * sizeof s)) != (ssize_t)sizeof s) {
            perror(path);
            return 1;
        }
        samples += s.samples;
    }
    printf("euid %d mean %llu samples %llu\n", (int)geteuid(), (unsigned long long)h.sample_rate, samples);
    return 0;
}
