/* secure.c: a setuid-root program, as TestSetuidSecure builds it. It
 * allocates, prints its effective uid, and with "close" closes stderr at
 * exit, as gnulib's close_stdout does in coreutils. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void close_stderr(void) { close(2); }

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "close") == 0)
        atexit(close_stderr);
    char *p = malloc(100);
    strcpy(p, "euid");
    printf("%s %d\n", p, (int)geteuid());
    free(p);
    return 0;
}
