/*
 * fault.c MODE: a program that dies of a signal, or handles it.
 *   segv    writes through NULL: must die of SIGSEGV
 *   pipe    writes to a pipe with no reader: must die of SIGPIPE
 *   handled writes through NULL with its own SIGSEGV handler, which
 *           prints "handled 11" and exits 5
 * The Go runtime's loader entry installs handlers for these signals in
 * every process that loads libheap.so; the shim must take them out again.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_segv(int sig)
{
    char msg[] = "handled 11\n";
    (void)sig;
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(6);
    _exit(5);
}

int main(int argc, char **argv)
{
    free(malloc(10));
    const char *mode = argc > 1 ? argv[1] : "segv";
    if (!strcmp(mode, "pipe")) {
        int p[2];
        if (pipe(p) != 0)
            return 3;
        close(p[0]);
        if (write(p[1], "x", 1) < 0)
            return 4; /* SIGPIPE ignored: write failed with EPIPE */
        return 0;
    }
    if (!strcmp(mode, "handled"))
        signal(SIGSEGV, on_segv);
    *(volatile int *)0 = 1;
    return 0;
}
