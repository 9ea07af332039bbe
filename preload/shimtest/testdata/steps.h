/*
 * steps.h: the step protocol of the known-answer programs (see known.c).
 * C and C++ alike; write(2) only, since stdio allocates.
 */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void out(const char *s) { ssize_t w = write(1, s, strlen(s)); (void)w; }

static void num(char *b, long long v)
{
    char t[24];
    int n = 0, neg = v < 0;
    unsigned long long u = neg ? -(unsigned long long)v : (unsigned long long)v;
    do t[n++] = '0' + u % 10; while (u /= 10);
    if (neg) *b++ = '-';
    while (n) *b++ = t[--n];
    *b = 0;
}

#define UNKNOWN (-1LL)
static void step(const char *name, long long a, long long f, long long ab, long long fb, long long peak)
{
    char line[256] = "STEP ", b[24];
    long long v[] = {a, f, ab, fb, peak};
    num(b, getpid());
    strcat(line, b);
    strcat(line, " ");
    strcat(line, name);
    for (int i = 0; i < 5; i++) {
        strcat(line, " ");
        if (v[i] == UNKNOWN) strcat(line, "-");
        else { num(b, v[i]); strcat(line, b); }
    }
    strcat(line, "\n");
    out(line);
    char c;
    if (read(0, &c, 1) != 1)
        _exit(3);
}

static void fail(const char *why) { out("FAIL "); out(why); out("\n"); exit(2); }
#define U(p) ((long long)malloc_usable_size(p))

