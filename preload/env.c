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
#include <stddef.h>
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
static struct hl_config config;
HL_HIDDEN const struct hl_config *const hl_cfg = &config;

// ---- the table ------------------------------------------------------------------

/* Every setting, as mimalloc's options.c keeps them: its name, how its
 * value is read, its bounds and its default. The parsing, the defaults
 * and the messages all come from here. */
enum kind {
    CHOICE, /* one of a few word lists */
    NUMBER, /* a decimal within [lo, hi] */
    BYTES,  /* a byte count within [lo, hi], with an optional k, m or g */
    PATH,   /* a file name; empty: none */
    PASSED, /* not the shim's: heapctl's, passed down to children */
};

/* A choice: its words, separated by spaces; messages name the first. */
struct choice {
    const char *words;
    int value;
};

struct setting {
    const char *name;
    enum kind kind;
    size_t at, size;             /* the field in struct hl_config */
    uint64_t lo, hi, dflt;       /* NUMBER, BYTES: bounds; all but PATH: the default */
    const struct choice *choices; /* CHOICE: ended by {NULL} */
    const char *otherwise;       /* CHOICE, PATH: what happens on a bad value; BYTES: examples */
};

#define FIELD(f) offsetof(struct hl_config, f), sizeof(((struct hl_config *)0)->f)

static const struct choice on_off[] = {{HL_WORDS_OFF, 0}, {HL_WORDS_ON, 1}, {NULL, 0}};
static const struct choice summaries[] = {
    {HL_WORDS_OFF, HL_SUMMARY_OFF}, {HL_WORDS_ON, HL_SUMMARY_ONE}, {HL_WORDS_ALL, HL_SUMMARY_ALL}, {NULL, 0}};
static const struct choice formats[] = {{"text", 0}, {"json", 1}, {NULL, 0}};
static const struct choice finders[] = {{"auto", HL_FIND_AUTO}, {"phdr", HL_FIND_PHDR}, {NULL, 0}};
static const struct choice py_reads[] = {{"auto", HL_PYREAD_AUTO}, {"mincore", HL_PYREAD_MINCORE}, {NULL, 0}};

static const struct setting settings[] = {
    {"HEAPLINE_SUMMARY", CHOICE, FIELD(summary), 0, 0, HL_SUMMARY_ONE, summaries, "summary on"},
    {"HEAPLINE_FORMAT", CHOICE, FIELD(json), 0, 0, 0, formats, "using text"},
    {"HEAPLINE_OUTPUT", PATH, FIELD(output), 0, 0, 0, NULL, "summary on stderr"},
    {"HEAPLINE_PROFILE", PATH, FIELD(profile), 0, 0, 0, NULL, "no profile at exit"},
    {"HEAPLINE_SAMPLE", BYTES, FIELD(sample), 0, HL_SAMPLE_MAX, HL_SAMPLE_BUILD_DEFAULT, NULL, "512k, 1m, 0 for off"},
    {"HEAPLINE_PYMALLOC", CHOICE, FIELD(pymalloc), 0, 0, 0, on_off, "pymalloc not wrapped"},
    {"HEAPLINE_FIND_OBJECT", CHOICE, FIELD(find_object), 0, 0, HL_FIND_AUTO, finders, "using auto"},
    {"HEAPLINE_PY_READ", CHOICE, FIELD(py_read), 0, 0, HL_PYREAD_AUTO, py_reads, "using auto"},
    {"HEAPLINE_STACKS", NUMBER, FIELD(stacks), 1, HL_STACKS_MAX, HL_STACKS_DEFAULT, NULL, NULL},
    {"HEAPLINE_SLOTS", NUMBER, FIELD(slots), 1, HL_SLOTS_MAX, HL_SLOTS_DEFAULT, NULL, NULL},
    {"HEAPLINE_PEAK_BATCH", NUMBER, FIELD(peak_batch), 0, HL_PEAK_BATCH_MAX, HL_PEAK_BATCH_DEFAULT, NULL, NULL},
    {"HEAPLINE_LIB", PASSED, 0, 0, 0, 0, 0, NULL, NULL},
};

#define NSETTINGS (sizeof settings / sizeof settings[0])

/* A setting's field: every one but the paths is a 4- or 8-byte integer. */
static void store(const struct setting *s, uint64_t v)
{
    char *at = (char *)&config + s->at;
    if (s->size == sizeof(uint64_t)) {
        memcpy(at, &v, sizeof v);
    } else {
        uint32_t w = (uint32_t)v;
        memcpy(at, &w, sizeof w);
    }
}

static void defaults(void)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (settings[i].kind != PATH && settings[i].kind != PASSED)
            store(&settings[i], settings[i].dflt);
}

// ---- reading a value --------------------------------------------------------------

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

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* v is one of words (separated by spaces). */
static int one_of(const char *v, const char *words)
{
    size_t n = strlen(v);
    for (const char *w = words; *w;) {
        size_t len = strcspn(w, " ");
        if (len == n && strncmp(w, v, n) == 0)
            return 1;
        w += len;
        w += strspn(w, " ");
    }
    return 0;
}

/* A path setting into out (cap bytes): relative paths are taken from where
 * the program started, not where it ends. 0 on success; otherwise one line
 * that ends with what happens instead. */
static int path_setting(const char *name, const char *v, char *out, size_t cap, const char *instead)
{
    size_t len = strlen(v), at = 0;
    if (v[0] != '/') {
        if (getcwd(out, cap - 2) == NULL) {
            hl_say(name, "=", v, ": cannot tell the working directory; ", instead, NULL);
            out[0] = 0;
            return -1;
        }
        at = strlen(out);
        out[at++] = '/';
    }
    if (at + len >= cap) {
        hl_say(name, "=", v, " is too long; ", instead, NULL);
        out[0] = 0;
        return -1;
    }
    memcpy(out + at, v, len + 1);
    return 0;
}

// ---- messages -----------------------------------------------------------------------

/* at p: s; the end. */
static char *put(char *p, const char *end, const char *s)
{
    while (*s && p < end)
        *p++ = *s++;
    return p;
}

/* at p: a byte count as BYTES reads it (512k, 1024g); the end. */
static char *put_bytes(char *p, const char *end, uint64_t v)
{
    static const char units[] = "kmg";
    int u = -1;
    while (u < 2 && v != 0 && v % 1024 == 0)
        v /= 1024, u++;
    char digits[24];
    *hl_decimal(digits, v) = 0;
    p = put(p, end, digits);
    if (u >= 0 && p < end)
        *p++ = units[u];
    return p;
}

static char *put_number(char *p, const char *end, const struct setting *s, uint64_t v)
{
    if (s->kind == BYTES)
        return put_bytes(p, end, v);
    char digits[24];
    *hl_decimal(digits, v) = 0;
    return put(p, end, digits);
}

/* "is neither 0, 1 nor all; summary on", "is not a number from 1 to
 * 65536; using 256": what a bad value gets, from the table. */
static void bad_value(const struct setting *s, const char *v)
{
    char why[256], *p = why, *end = why + sizeof why - 1;
    if (s->kind == CHOICE) {
        p = put(p, end, " is neither ");
        for (const struct choice *c = s->choices; c->words != NULL; c++) {
            char first[16];
            size_t n = strcspn(c->words, " ");
            n = n < sizeof first ? n : sizeof first - 1;
            memcpy(first, c->words, n);
            first[n] = 0;
            if (c != s->choices)
                p = put(p, end, c[1].words == NULL ? " nor " : ", ");
            p = put(p, end, first);
        }
        p = put(p, end, "; ");
        p = put(p, end, s->otherwise);
    } else {
        p = put(p, end, s->kind == BYTES ? " is not a byte count from " : " is not a number from ");
        p = put_number(p, end, s, s->lo);
        p = put(p, end, " to ");
        p = put_number(p, end, s, s->hi);
        if (s->otherwise != NULL) {
            p = put(p, end, " (");
            p = put(p, end, s->otherwise);
            p = put(p, end, ")");
        }
        p = put(p, end, "; using ");
        p = put_number(p, end, s, s->dflt);
    }
    *p = 0;
    hl_say(s->name, "=", v, why, NULL);
}

// ---- one setting ----------------------------------------------------------------------

static void apply(const struct setting *s, const char *v)
{
    long long n;
    switch (s->kind) {
    case CHOICE:
        if (*v == 0) {
            store(s, s->dflt);
            return;
        }
        for (const struct choice *c = s->choices; c->words != NULL; c++)
            if (one_of(v, c->words)) {
                store(s, (uint64_t)c->value);
                return;
            }
        bad_value(s, v);
        return;
    case NUMBER:
    case BYTES:
        n = s->kind == NUMBER ? number(v, (long long)s->lo, (long long)s->hi) : bytes(v, (long long)s->lo, (long long)s->hi);
        if (n < 0)
            bad_value(s, v);
        else
            store(s, (uint64_t)n);
        return;
    case PATH:
        if (*v != 0)
            path_setting(s->name, v, (char *)&config + s->at, s->size, s->otherwise);
        return;
    case PASSED:
        return;
    }
}

static void setting(const char *kv)
{
    const char *v = strchr(kv, '=') + 1;
    size_t len = (size_t)(v - 1 - kv);
    for (size_t i = 0; i < NSETTINGS; i++)
        if (strlen(settings[i].name) == len && strncmp(kv, settings[i].name, len) == 0) {
            apply(&settings[i], v);
            return;
        }
    /* A misspelt name would otherwise be ignored without a word. */
    char name[64];
    if (len >= sizeof name)
        len = sizeof name - 1;
    memcpy(name, kv, len);
    name[len] = 0;
    hl_say(name, " is not a setting of the shim; ignored", NULL);
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
    defaults();
    if (!getauxval(AT_SECURE) && read_environ_file() != 0) {
        /* no /proc: environ is set by the time anything but the loader calls */
        for (char **e = environ; e != NULL && *e != NULL; e++)
            entry_read(*e);
    }
    /* The sampler's draws and weights are in doubles (sample_profile.c):
     * for the defaults too, or a secure process drew gaps of 0 and
     * sampled every allocation. */
    config.sample_mean = (double)config.sample;
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
