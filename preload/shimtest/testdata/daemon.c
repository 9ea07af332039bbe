// daemon.c: what a daemon does at start, then its work. It closes every
// fd above 2, opens its output (fd 3) and its input (fd 4), and copies one
// into the other a byte at a time between allocations. It also lists its
// fds before and after, and says whether fds 0-2 are open: a profiler
// must leave all of these as they were.
//   daemon IN OUT   prints "fds N" (open fds after the copy) and
//                   "stdio a b c" (1 open, 0 closed, as at start)
#include <fcntl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) != -1;
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int stdio[3];
    for (int fd = 0; fd < 3; fd++)
        stdio[fd] = fcntl(fd, F_GETFD) != -1;
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644), in = open(argv[1], O_RDONLY);
    if (out < 0 || in < 0)
        return 3;
    char c;
    void *keep[4096];
    int k = 0;
    while (read(in, &c, 1) == 1) {
        for (int i = 0; i < 64; i++) {
            void *p = malloc(64 + (size_t)(i * 37 % 4000));
            if (k < 4096 && i % 8 == 0)
                keep[k++] = p;
            else
                free(p);
        }
        if (write(out, &c, 1) != 1)
            return 4;
    }
    for (int i = 0; i < k; i++)
        free(keep[i]);
    int n = open_fds();
    close(in);
    close(out);
    int now[3];
    for (int fd = 0; fd < 3; fd++)
        now[fd] = fcntl(fd, F_GETFD) != -1;
    // Written to a file of its own: stdout may be closed.
    int report = open(argv[2], O_WRONLY | O_APPEND);
    if (report >= 0) {
        dprintf(report, "\nfds %d\nstdio %d %d %d\nnow %d %d %d\n", n, stdio[0], stdio[1], stdio[2], now[0], now[1], now[2]);
        close(report);
    }
    return 0;
}
