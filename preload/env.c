/*
 * env.c: what the shim reads about its process, once, at start: its
 * HEAPLINE_* settings (and whether LD_PRELOAD names it by a relative path),
 * its command line and its start time.
 *
 * Everything comes from /proc/self with open/read into static buffers:
 * getenv is not safe this early (the first malloc can come before libc has
 * set environ up) nor on the allocation path, and stdio allocates.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>
#include "shim.h"

extern char **environ;

/* Sampling is on, at HL_SAMPLE_DEFAULT, unless HEAPLINE_SAMPLE=0 turns it
 * off, as Go's heap profile is for every program: when a leak shows up it
 * is too late to restart with a setting. bench/sampling.sh builds
 * libraries with another default, to measure sampling against none in one
 * interleaved run. */
#ifndef HL_SAMPLE_BUILD_DEFAULT
#define HL_SAMPLE_BUILD_DEFAULT HL_SAMPLE_DEFAULT
#endif

/* The one home of every setting. Only env.c can name it, and only
 * hl_config_read (with the parsers it calls) writes it: once, from boot
 * (boot.c), while any other thread that calls in waits for boot to end.
 * Everyone else reads it through hl_cfg, a const pointer to const (in
 * RELRO, being a relocated constant): nothing writes a setting after. */
static struct hl_config config = {
    .summary = HL_SUMMARY_ONE,
    .json = 0,
    .slots = HL_SLOTS_DEFAULT,
    .peak_batch = HL_PEAK_BATCH_DEFAULT,
    .sample = HL_SAMPLE_BUILD_DEFAULT,
    .stacks = HL_STACKS_DEFAULT,
};
HL_HIDDEN const struct hl_config *const hl_cfg = &config;

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A decimal number within [lo, hi], or -1. */
static long long number(const char *s, long long lo, long long hi)
{
    long long v = 0;
    if (*s == 0)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > hi)
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v < lo || v > hi ? -1 : v;
}

/* A byte count within [lo, hi], with an optional k, m or g (binary), or -1. */
static long long bytes(const char *s, long long lo, long long hi)
{
    char digits[32];
    size_t n = strlen(s);
    long long unit = 1;
    if (n > 0 && n < sizeof digits) {
        char u = s[n - 1] | 0x20;
        unit = u == 'k' ? 1 << 10 : u == 'm' ? 1 << 20 : u == 'g' ? 1 << 30 : 1;
    }
    if (n == 0 || n >= sizeof digits)
        return -1;
    memcpy(digits, s, n + 1);
    if (unit != 1)
        digits[n - 1] = 0;
    long long v = number(digits, 0, hi);
    if (v < 0 || v > hi / unit || v * unit < lo)
        return -1;
    return v * unit;
}

/* A path setting into out (cap bytes): relative paths are taken from where
 * the program started, not where it ends. 0 on success; otherwise one line
 * that ends with what happens instead. */
static int path_setting(const char *name, const char *v, char *out, size_t cap, const char *instead)
{
    size_t len = strlen(v), at = 0;
    if (v[0] != '/') {
        if (getcwd(out, cap - 2) == NULL) {
            hl_say(name, "=", v, ": cannot tell the working directory", instead, NULL);
            out[0] = 0;
            return -1;
        }
        at = strlen(out);
        out[at++] = '/';
    }
    if (at + len >= cap) {
        hl_say(name, "=", v, " is too long", instead, NULL);
        out[0] = 0;
        return -1;
    }
    memcpy(out + at, v, len + 1);
    return 0;
}

static int one_of(const char *v, const char *a, const char *b, const char *c, const char *d)
{
    return strcmp(v, a) == 0 || strcmp(v, b) == 0 || strcmp(v, c) == 0 || strcmp(v, d) == 0;
}

static void setting(const char *kv)
{
    const char *v = strchr(kv, '=') + 1;
    long long n;
    if (starts_with(kv, "HEAPLINE_SUMMARY=")) {
        if (one_of(v, "0", "off", "no", "false"))
            config.summary = HL_SUMMARY_OFF;
        else if (one_of(v, "1", "on", "yes", "true") || *v == 0)
            config.summary = HL_SUMMARY_ONE;
        else if (strcmp(v, "all") == 0)
            config.summary = HL_SUMMARY_ALL;
        else
            hl_say("HEAPLINE_SUMMARY=", v, " is neither 0, 1 nor all; summary on", NULL);
    } else if (starts_with(kv, "HEAPLINE_FORMAT=")) {
        if (strcmp(v, "json") == 0)
            config.json = 1;
        else if (strcmp(v, "text") == 0 || *v == 0)
            config.json = 0;
        else
            hl_say("HEAPLINE_FORMAT=", v, " is neither text nor json; using text", NULL);
    } else if (starts_with(kv, "HEAPLINE_OUTPUT=")) {
        if (*v != 0)
            path_setting("HEAPLINE_OUTPUT", v, config.output, sizeof config.output, "; summary on stderr");
    } else if (starts_with(kv, "HEAPLINE_PROFILE=")) {
        if (*v != 0)
            path_setting("HEAPLINE_PROFILE", v, config.profile, sizeof config.profile, "; no profile at exit");
    } else if (starts_with(kv, "HEAPLINE_SAMPLE=")) {
        if ((n = bytes(v, 0, (long long)1 << 40)) < 0)
            hl_say("HEAPLINE_SAMPLE=", v, " is not a byte count (512k, 1m, 0 for off); ignored", NULL);
        else
            config.sample = (uint64_t)n;
    } else if (starts_with(kv, "HEAPLINE_PYMALLOC=")) {
        if (one_of(v, "0", "off", "no", "false") || *v == 0)
            config.pymalloc = 0;
        else if (one_of(v, "1", "on", "yes", "true"))
            config.pymalloc = 1;
        else
            hl_say("HEAPLINE_PYMALLOC=", v, " is neither 0 nor 1; pymalloc not wrapped", NULL);
    } else if (starts_with(kv, "HEAPLINE_FIND_OBJECT=")) {
        if (strcmp(v, "auto") == 0 || *v == 0)
            config.find_object = HL_FIND_AUTO;
        else if (strcmp(v, "phdr") == 0)
            config.find_object = HL_FIND_PHDR;
        else
            hl_say("HEAPLINE_FIND_OBJECT=", v, " is neither auto nor phdr; using auto", NULL);
    } else if (starts_with(kv, "HEAPLINE_PY_READ=")) {
        if (strcmp(v, "auto") == 0 || *v == 0)
            config.py_read = HL_PYREAD_AUTO;
        else if (strcmp(v, "mincore") == 0)
            config.py_read = HL_PYREAD_MINCORE;
        else
            hl_say("HEAPLINE_PY_READ=", v, " is neither auto nor mincore; using auto", NULL);
    } else if (starts_with(kv, "HEAPLINE_STACKS=")) {
        if ((n = number(v, 1, HL_STACKS_MAX)) < 0)
            hl_say("HEAPLINE_STACKS=", v, " is not a number from 1 to 65536; using 1024", NULL);
        else
            config.stacks = (uint32_t)n;
    } else if (starts_with(kv, "HEAPLINE_SLOTS=")) {
        if ((n = number(v, 1, HL_SLOTS_MAX)) < 0)
            hl_say("HEAPLINE_SLOTS=", v, " is not a number from 1 to 65536; using 256", NULL);
        else
            config.slots = (uint32_t)n;
    } else if (starts_with(kv, "HEAPLINE_PEAK_BATCH=")) {
        if ((n = number(v, 0, (long long)1 << 40)) < 0)
            hl_say("HEAPLINE_PEAK_BATCH=", v, " is not a byte count from 0 to 2^40; using 262144", NULL);
        else
            config.peak_batch = (uint64_t)n;
    } else if (!starts_with(kv, "HEAPLINE_LIB=")) { /* heapctl's, passed down to children */
        /* A misspelt name would otherwise be ignored without a word. */
        char name[64];
        size_t len = (size_t)(v - 1 - kv);
        if (len >= sizeof name)
            len = sizeof name - 1;
        memcpy(name, kv, len);
        name[len] = 0;
        hl_say(name, " is not a setting of the shim; ignored", NULL);
    }
}

/* LD_PRELOAD naming libheap.so by a relative path ("bin/libheap.so")
 * loads it here, but not in a child that starts in another directory:
 * there ld.so alone says so, in words that do not name heapline. One line,
 * while it can still be told. A bare name is looked up in the library
 * path, wherever the child runs; an absolute path works everywhere. */
static void preload_setting(const char *kv)
{
    const char *p = strchr(kv, '=') + 1;
    while (*p) {
        size_t n = strcspn(p, " :");
        const char *slash = NULL;
        for (const char *c = p; c < p + n; c++)
            if (*c == '/')
                slash = c;
        if (slash != NULL && p[0] != '/' && p + n - (slash + 1) == 10 && strncmp(slash + 1, "libheap.so", 10) == 0) {
            char path[256];
            size_t len = n < sizeof path ? n : sizeof path - 1;
            memcpy(path, p, len);
            path[len] = 0;
            hl_say("LD_PRELOAD names ", path, " by a relative path: a child that starts in another directory runs without the shim; give its absolute path", NULL);
            return;
        }
        p += n;
        p += strspn(p, " :");
    }
}

/* The entries env.c reads: HEAPLINE_ settings, and LD_PRELOAD. */
static void entry_read(const char *kv)
{
    if (starts_with(kv, "HEAPLINE_") && strchr(kv, '='))
        setting(kv);
    else if (starts_with(kv, "LD_PRELOAD="))
        preload_setting(kv);
}

/* Feed entry_read() every entry of /proc/self/environ, read in
 * chunks; entries longer than the buffer are not ours to care about. */
static int read_environ_file(void)
{
    int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char chunk[4096], entry[1024];
    size_t len = 0;
    int keep = 1;
    ssize_t got;
    while ((got = read(fd, chunk, sizeof chunk)) > 0) {
        for (ssize_t i = 0; i < got; i++) {
            char c = chunk[i];
            if (c == 0) {
                entry[len] = 0;
                if (keep)
                    entry_read(entry);
                len = 0;
                keep = 1;
            } else if (len < sizeof entry - 1) {
                entry[len++] = c;
            } else {
                keep = 0;
            }
        }
    }
    close(fd);
    return 0;
}

/* The settings' one write, from boot. In a secure-execution process (a
 * setuid or setgid program, or one with file capabilities: AT_SECURE,
 * read from the auxiliary vector, not the environment) none is read: the
 * environment is the user's, the rights are the program's, and the shim
 * can be preloaded system-wide (/etc/ld.so.preload). The defaults
 * count into the region and write the one line on the stderr the
 * program was given, nowhere else (output.c). */
void hl_config_read(void)
{
    if (getauxval(AT_SECURE))
        return;
    if (read_environ_file() != 0) {
        /* no /proc: environ is set by the time anything but the loader calls */
        for (char **e = environ; e != NULL && *e != NULL; e++)
            entry_read(*e);
    }
    config.sample_mean = (double)config.sample; /* the sampler's draws and weights are in doubles (profile.c) */
}

/* argv joined by spaces, as much as fits, an empty argument written ''
 * (joined, it would vanish: "--save  --appendonly"). Trailing NULs are
 * trimmed, so an empty last argument is not shown: a program that wrote
 * its title over its argv (setproctitle) pads it with NULs, which cannot
 * be told from empty arguments. */
void hl_command_read(char *buf, size_t n)
{
    char raw[HL_COMMAND_MAX];
    buf[0] = 0;
    if (n < 2)
        return;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t got = read(fd, raw, n - 1 < sizeof raw ? n - 1 : sizeof raw);
    close(fd);
    if (got <= 0)
        return;
    while (got > 0 && raw[got - 1] == 0)
        got--;
    size_t o = 0;
    for (ssize_t i = 0; i <= got && o < n - 1; i++) {
        if (i == got || raw[i] == 0) { /* an argument's end */
            if (i == 0 || raw[i - 1] == 0) /* it was empty */
                for (int q = 0; q < 2 && o < n - 1; q++)
                    buf[o++] = '\'';
            if (i < got && o < n - 1)
                buf[o++] = ' ';
        } else {
            buf[o++] = raw[i];
        }
    }
    buf[o] = 0;
}

/* A numeric field (3 and up) of a /proc/<pid>/stat file, 0 if it cannot
 * be read. The command (field 2) may hold spaces and parentheses: count
 * from the last ')'. */
uint64_t hl_stat_field(const char *path, int want)
{
    char buf[1024];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0)
        return 0;
    buf[got] = 0;
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    int field = 2;
    for (; *p && field < want; p++)
        if (*p == ' ')
            field++;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (uint64_t)(*p - '0');
    return v;
}

/* Field 22 of /proc/self/stat: clock ticks from boot to this process's
 * start. exec keeps it, a new process with a reused pid does not.
 * "self/./stat", not "self/stat": qemu-user answers the guest's open of
 * /proc/self/stat itself, with a start time of its own making, which
 * heapctl's read of /proc/PID/stat would never match (the region would
 * look stale); the kernel resolves both to the same file. */
uint64_t hl_start_ticks(void) { return hl_stat_field("/proc/self/./stat", 22); }
