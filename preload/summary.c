/*
 * summary.c: the exit summary, one line on stderr (or HEAPLINE_OUTPUT), as
 * text or JSON. Formatted by hand into a static buffer and written with
 * write(2): at exit stdio may already be torn down, and must not allocate.
 *
 *   heapline[4711] python3 x.py: 4153 allocs, 4123 frees, peak 18.3 MiB malloc (± 512.0 KiB) + 160.0 MiB mapped, live at exit 472.2 KiB + 0 B mapped, 1.21 s
 *
 * After an exec, the command is followed by " (exec'd from <the image
 * before>)". One line per run by default (see parent_runs_shim).
 *
 * The mapped parts only when the program mapped memory of its own; the
 * peak's error bound only when there is one (docs/counting.md); Python's
 * objects (pymalloc's blocks, pymalloc.c) only when they are counted.
 *
 * Byte figures round half to even, like Go's %.1f, so heapctl prints the
 * same line from the same counters (ctl/internal/report).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "shim.h"

struct buf {
    char b[2048];
    size_t n;
};

static void put(struct buf *o, const char *s)
{
    for (; *s && o->n < sizeof o->b - 1; s++)
        o->b[o->n++] = *s;
}

/* header.mode's name in the JSON summary (heapctl's: region.ModeName);
 * NULL where the shim counts nothing or has not booted. */
static const char *mode_name(uint32_t m)
{
    switch (m) {
    case HL_MODE_GLIBC: return "glibc";
    case HL_MODE_GENERIC: return "generic";
    case HL_MODE_BYPASSED: return "bypassed";
    }
    return NULL;
}

static void put_u64(struct buf *o, uint64_t v)
{
    char d[24];
    *hl_decimal(d, v) = 0;
    put(o, d);
}

static void put_i64(struct buf *o, int64_t v)
{
    if (v < 0) {
        put(o, "-");
        put_u64(o, (uint64_t)0 - (uint64_t)v);
    } else {
        put_u64(o, (uint64_t)v);
    }
}

/* num/den with `places` decimals, rounded half to even. */
static void put_fixed(struct buf *o, uint64_t num, uint64_t den, int places)
{
    uint64_t scale = 1;
    for (int i = 0; i < places; i++)
        scale *= 10;
    unsigned __int128 x = (unsigned __int128)num * scale;
    uint64_t q = (uint64_t)(x / den), r = (uint64_t)(x % den);
    if (2 * (unsigned __int128)r > den || (2 * (unsigned __int128)r == den && (q & 1)))
        q++;
    put_u64(o, q / scale);
    if (places) {
        put(o, ".");
        char d[20];
        uint64_t f = q % scale;
        for (int i = places - 1; i >= 0; i--, f /= 10)
            d[i] = (char)('0' + f % 10);
        d[places] = 0;
        put(o, d);
    }
}

static void put_bytes(struct buf *o, int64_t v)
{
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (v < 0) {
        put(o, "-");
        v = -v;
    }
    if (v < 1024) {
        put_u64(o, (uint64_t)v);
        put(o, " B");
        return;
    }
    uint64_t den = 1024;
    int u = 0;
    while (u < 4 && (uint64_t)v >= den * 1024) {
        den *= 1024;
        u++;
    }
    put_fixed(o, (uint64_t)v, den, 1);
    put(o, " ");
    put(o, units[u]);
}

/* The command for a text line: at most COMMAND_SHOWN bytes, cut at a
 * character and marked "...", control characters as '?', so that a line
 * stays one line. report.Command in heapctl does the same. */
#define COMMAND_SHOWN 60
static void put_command(struct buf *o, const char *s)
{
    size_t n = strlen(s), cut = n;
    if (n > COMMAND_SHOWN) {
        cut = COMMAND_SHOWN;
        while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80)
            cut--; /* not inside a UTF-8 sequence */
    }
    for (size_t i = 0; i < cut && o->n < sizeof o->b - 1; i++) {
        unsigned char c = (unsigned char)s[i];
        o->b[o->n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (cut < n)
        put(o, "...");
}

static void put_json_string(struct buf *o, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    put(o, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[3] = {'\\', (char)c, 0};
            put(o, e);
        } else if (c < 0x20 || c == 0x7f) {
            char e[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
            put(o, e);
        } else {
            char e[2] = {(char)c, 0};
            put(o, e);
        }
    }
    put(o, "\"");
}

static void field_u64(struct buf *o, const char *name, uint64_t v)
{
    put(o, ",\"");
    put(o, name);
    put(o, "\":");
    put_u64(o, v);
}

static void field_i64(struct buf *o, const char *name, int64_t v)
{
    put(o, ",\"");
    put(o, name);
    put(o, "\":");
    put_i64(o, v);
}

/* HEAPLINE_OUTPUT with %p replaced by the pid, %n by the pid namespace's
 * inode (a pid is a pid there: heapctl run names each image's file with
 * both, so that a process of a nested namespace with its child's pid never
 * takes the child's name), and %% by %. */
static int open_output(const char *setting, pid_t pid, const char *what, const char *instead, int dump)
{
    char path[600];
    size_t n = 0;
    for (const char *s = setting; *s && n < sizeof path - 24; s++) {
        if (s[0] == '%' && (s[1] == 'p' || s[1] == 'n')) {
            struct buf d = {.n = 0};
            put_u64(&d, s[1] == 'p' ? (uint64_t)pid : hl_region != NULL ? hl_region->pid_ns : hl_pid_ns());
            memcpy(path + n, d.b, d.n);
            n += d.n;
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            path[n++] = '%';
            s++;
        } else {
            path[n++] = *s;
        }
    }
    path[n] = 0;
    /* The file is created 0600 (the command line, and in a dump
     * addresses) and never through a symlink: one planted in a shared
     * directory (/tmp) would send the write to a file of the planter's
     * choosing (fs.protected_symlinks is not on everywhere). The user
     * asked to overwrite a file at that name only when it is their own:
     * a regular file of our euid with no other link, truncated here, not
     * at open, once checked. A summary may also go to a FIFO of ours or a
     * terminal (a character device); a dump, only to a regular file.
     * O_NONBLOCK: a FIFO with no reader fails at once instead of holding
     * the exit; hl_write_all waits for a slow one. */
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC | O_NONBLOCK, 0600);
    const char *why = fd >= 0 ? NULL : errno == ELOOP ? ": it is a symlink" : "";
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) != 0)
        why = "";
    else if (fd >= 0 && S_ISREG(st.st_mode)) {
        if (st.st_uid != geteuid())
            why = ": it is another user's file";
        else if (st.st_nlink != 1)
            why = ": it has another link";
        else if (ftruncate(fd, 0) != 0 || (dump && fchmod(fd, 0600) != 0))
            why = "";
    } else if (fd >= 0 && (dump || !(S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))))
        why = ": not a regular file";
    else if (fd >= 0 && S_ISFIFO(st.st_mode) && st.st_uid != geteuid())
        why = ": it is another user's FIFO";
    if (why != NULL) {
        if (fd >= 0)
            close(fd);
        hl_say("cannot write the ", what, " to ", path, why, instead, NULL);
        return -1;
    }
    return fd;
}

/* The dump's bytes from *at up to `to`, which the region never wrote:
 * zeros, as a hole where the file seeks. */
static void dump_gap(int fd, uint64_t *at, uint64_t to)
{
    static const char zeros[4096];
    if (to <= *at)
        return;
    if (lseek(fd, (off_t)(to - *at), SEEK_CUR) == (off_t)-1)
        for (uint64_t n = to - *at; n > 0;) {
            size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
            hl_write_all(fd, zeros, k);
            n -= k;
        }
    *at = to;
}

/* The dump's bytes [off, off + n) of the region, after a gap from *at. */
static void dump_part(int fd, uint64_t *at, uint64_t off, uint64_t n)
{
    if (off < *at || n == 0)
        return;
    dump_gap(fd, at, off);
    hl_write_all(fd, (const char *)hl_region + off, (size_t)n);
    *at = off + n;
}

/* HEAPLINE_PROFILE: the region as it is at exit, byte for byte, so that
 * `heapctl profile --from` reads it like a region file. Only the tables'
 * entries in use are read: the pages past them are not the region file's
 * (grow.c), and reading them would take them from /dev/shm. */
static void profile_write(void)
{
    struct hl_header *r = hl_region;
    if (hl_cfg->profile[0] == 0 || r->prof_offset == 0)
        return;
    int fd = open_output(hl_cfg->profile, r->pid, "profile", "", 1);
    if (fd < 0)
        return;
    uint64_t at = 0, len = hl_region_len(), objects = r->prof_offset + (uint64_t)r->nstacks * sizeof(struct hl_stack);
    dump_part(fd, &at, 0, r->prof_offset + (uint64_t)r->stacks_used * sizeof(struct hl_stack));
    dump_part(fd, &at, objects, r->objects_used * sizeof(struct hl_object));
    if (r->pycode_offset != 0)
        dump_part(fd, &at, r->pycode_offset, (uint64_t)r->pycodes_used * sizeof(struct hl_pycode));
    if (r->pyarena_offset != 0)
        dump_part(fd, &at, r->pyarena_offset, (uint64_t)r->pyarenas_used * sizeof(struct hl_pyarena));
    /* the tail: a seekable file's length is set, a pipe gets zeros */
    if (lseek(fd, 0, SEEK_CUR) == (off_t)-1 || ftruncate(fd, (off_t)len) != 0)
        dump_gap(fd, &at, len);
    close(fd);
}

/* HEAPLINE_OUTPUT names a file per process (a %p in it): every process
 * writes its own, and none stays silent for its parent. */
static int output_per_process(const char *setting)
{
    for (const char *s = setting; s[0]; s++)
        if (s[0] == '%' && s[1] != 0 && *++s == 'p')
            return 1;
    return 0;
}

/* ---- one line per run ---------------------------------------------------
 * A wrapper chain (pyenv's python3 is a bash script: subshells, helper
 * programs, then exec) once gave 33 lines for one `python3 -c 'x=1'`, the
 * user's own last. By default a process whose parent runs the shim now
 * stays silent: the parent's line is the run's. The one line then names
 * the process the user started, as what it exec'd into, with the image
 * before the exec (exec_from). HEAPLINE_SUMMARY=all prints every line,
 * and so does a destination of one file per process (%p): the silence is
 * for a shared one. heapctl run sets all and sums the tree up itself. */

static char exec_from[HL_COMMAND_MAX]; /* the command of our image before exec, "" if none */

void hl_summary_exec_from(const char *command)
{
    size_t n = strnlen(command, sizeof exec_from - 1);
    memcpy(exec_from, command, n);
    exec_from[n] = 0;
}

/* "<prefix><n><suffix>" into buf (at least 64 bytes). */
static const char *proc_path(char *buf, const char *prefix, uint64_t n, const char *suffix)
{
    struct buf d = {.n = 0};
    put(&d, prefix);
    put_u64(&d, n);
    put(&d, suffix);
    d.b[d.n] = 0;
    memcpy(buf, d.b, d.n + 1);
    return buf;
}

/* The region at path is the live region of process pid as /proc names it:
 * its header names that pid, the process's start time and pid namespace,
 * and the process has not taken its summary yet. */
static int live_region_of(const char *path, uint64_t pid, uint64_t ticks, uint64_t ns)
{
    static struct hl_header h; /* static: a deep stack may be short at exit */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int ours = hl_region_header_of(fd, &h, pid);
    close(fd);
    return ours && h.start_ticks == ticks && h.pid_ns == ns && !(__atomic_load_n(&h.flags, __ATOMIC_RELAXED) & HL_FLAG_EXITED);
}

/* A region of the third name form (region.c), "<path>.<16 hex digits>",
 * is the live region of pid: at most 16 such names are looked at. */
static int random_name_live(const char *path, uint64_t pid, uint64_t ticks, uint64_t ns)
{
    const char *base = path + sizeof "/dev/shm/" - 1;
    size_t blen = strlen(base), plen = strlen(path);
    char full[128];
    int dir = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0 || plen + 18 > sizeof full) {
        if (dir >= 0)
            close(dir);
        return 0;
    }
    int live = 0, looked = 0;
    static char buf[4096]; /* static: a deep stack may be short at exit */
    long got;
    while (!live && looked < 16 && (got = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long off = 0; off < got && !live && looked < 16;) {
            struct dirent64 *d = (struct dirent64 *)(buf + off);
            off += d->d_reclen;
            if (strncmp(d->d_name, base, blen) != 0 || d->d_name[blen] != '.' || strlen(d->d_name + blen) != 17)
                continue;
            looked++;
            memcpy(full, path, plen);
            memcpy(full + plen, d->d_name + blen, 18);
            live = live_region_of(full, pid, ticks, ns);
        }
    }
    close(dir);
    return live;
}

/* Our parent runs the shim. The parent is read through /proc: its pid
 * there (field 4 of our stat, 0 when the parent is outside the pid
 * namespace that /proc shows, as for the first process of an `unshare
 * --pid --fork --mount-proc`: that one prints), its start time and its
 * pid namespace, which must be those its region's header names. A region
 * published under another namespace's name (region.c) is tried too. */
static int parent_runs_shim(void)
{
    char path[96];
    uint64_t ppid = hl_stat_field("/proc/self/stat", 4);
    if (ppid == 0)
        return 0;
    uint64_t ticks = hl_stat_field(proc_path(path, "/proc/", ppid, "/stat"), 22);
    struct stat st;
    if (ticks == 0 || stat(proc_path(path, "/proc/", ppid, "/ns/pid"), &st) != 0)
        return 0;
    uint64_t ns = (uint64_t)st.st_ino;
    if (live_region_of(proc_path(path, HL_PATH_PREFIX, ppid, ""), ppid, ticks, ns))
        return 1;
    proc_path(path, HL_PATH_PREFIX, ppid, ".");
    size_t at = strlen(path);
    proc_path(path + at, "", ns, "");
    if (live_region_of(path, ppid, ticks, ns))
        return 1;
    return random_name_live(path, ppid, ticks, ns);
}

void hl_summary_write(void)
{
    struct hl_header *r = hl_region;
    struct hl_counters t;
    hl_totals(r, &t);
    int64_t live = (int64_t)(t.allocated_bytes - t.freed_bytes);
    hl_peak_update(r, live);
    uint64_t now = hl_now_ns();
    hl_pymalloc_live(&r->py_exit_objects, &r->py_exit_bytes); /* before the flag: readers take them with it */
    __atomic_store_n(&r->exit_ns, now, __ATOMIC_RELAXED);
    __atomic_or_fetch(&r->flags, HL_FLAG_EXITED, __ATOMIC_RELEASE);
    if (hl_cfg->summary == HL_SUMMARY_OFF || (hl_cfg->summary == HL_SUMMARY_ONE && !output_per_process(hl_cfg->output) &&
                                               parent_runs_shim()))
        return;

    uint64_t peak = __atomic_load_n(&r->peak_live, __ATOMIC_RELAXED);
    uint64_t mapped = __atomic_load_n(&r->mapped_bytes, __ATOMIC_RELAXED);
    uint64_t peak_mapped = __atomic_load_n(&r->peak_mapped_bytes, __ATOMIC_RELAXED);
    uint64_t elapsed = now - r->start_ns;
    static struct buf o; /* static: a deep stack may be short at exit */
    o.n = 0;
    if (hl_cfg->json) {
        put(&o, "{\"pid\":");
        put_i64(&o, r->pid);
        put(&o, ",\"command\":");
        put_json_string(&o, r->command);
        if (exec_from[0]) {
            put(&o, ",\"exec_from\":");
            put_json_string(&o, exec_from);
        }
        put(&o, ",\"source\":\"preload\",\"elapsed_s\":");
        put_fixed(&o, elapsed, 1000000000u, 6);
        field_i64(&o, "live_bytes", live);
        field_i64(&o, "live_blocks", (int64_t)(t.allocs - t.frees));
        field_u64(&o, "peak_live_bytes", peak);
        field_u64(&o, "peak_error_bytes", r->peak_slack * r->threads_max);
        field_u64(&o, "allocs", t.allocs);
        field_u64(&o, "frees", t.frees);
        field_u64(&o, "allocated_bytes", t.allocated_bytes);
        field_u64(&o, "freed_bytes", t.freed_bytes);
        field_u64(&o, "threads", r->threads_seen);
        field_u64(&o, "mapped_bytes", mapped);
        field_u64(&o, "peak_mapped_bytes", peak_mapped);
        field_u64(&o, "mappings", __atomic_load_n(&r->mappings, __ATOMIC_RELAXED));
        if (r->py_allocs != 0) { /* pymalloc's blocks (pymalloc.c); none under PYTHONMALLOC */
            field_u64(&o, "py_allocs", r->py_allocs);
            field_u64(&o, "py_frees", r->py_frees);
            field_u64(&o, "py_allocated_bytes", r->py_alloc_bytes);
            field_u64(&o, "py_freed_bytes", r->py_free_bytes);
        }
        if (r->py_exit_objects != 0) { /* from pymalloc's pools (pymalloc.c) */
            field_u64(&o, "py_live_objects", r->py_exit_objects);
            field_u64(&o, "py_live_bytes", r->py_exit_bytes);
        }
        const char *mode = mode_name(__atomic_load_n(&r->mode, __ATOMIC_RELAXED));
        if (mode != NULL) {
            put(&o, ",\"mode\":\"");
            put(&o, mode);
            put(&o, "\"");
        }
        if (r->bypassed_by[0]) {
            put(&o, ",\"bypassed_by\":");
            put_json_string(&o, r->bypassed_by);
        }
        put(&o, ",\"exited\":true}\n");
    } else {
        uint64_t peak_error = r->peak_slack * r->threads_max;
        put(&o, "heapline[");
        put_i64(&o, r->pid);
        put(&o, "]");
        if (r->command[0]) {
            put(&o, " ");
            put_command(&o, r->command);
        }
        if (exec_from[0]) {
            put(&o, " (exec'd from ");
            put_command(&o, exec_from);
            put(&o, ")");
        }
        put(&o, ": ");
        put_u64(&o, t.allocs);
        put(&o, t.allocs == 1 ? " alloc, " : " allocs, ");
        put_u64(&o, t.frees);
        put(&o, t.frees == 1 ? " free, peak " : " frees, peak ");
        put_bytes(&o, (int64_t)peak);
        if (peak_mapped)
            put(&o, " malloc");
        if (peak_error) {
            put(&o, " (\xc2\xb1 "); /* ± */
            put_bytes(&o, (int64_t)peak_error);
            put(&o, ")");
        }
        if (peak_mapped) {
            put(&o, " + ");
            put_bytes(&o, (int64_t)peak_mapped);
            put(&o, " mapped");
        }
        put(&o, ", live at exit ");
        put_bytes(&o, live);
        if (peak_mapped) {
            put(&o, " + ");
            put_bytes(&o, (int64_t)mapped);
            put(&o, " mapped");
        }
        if (r->py_allocs != 0) {
            put(&o, ", python objects ");
            put_u64(&o, r->py_allocs);
            put(&o, " allocated (");
            put_bytes(&o, (int64_t)r->py_alloc_bytes);
            put(&o, "), ");
            put_u64(&o, r->py_allocs - r->py_frees);
            put(&o, " live (");
            put_bytes(&o, (int64_t)(r->py_alloc_bytes - r->py_free_bytes));
            put(&o, ")");
        } else if (r->py_exit_objects != 0) {
            put(&o, ", python objects ");
            put_u64(&o, r->py_exit_objects);
            put(&o, " live (");
            put_bytes(&o, (int64_t)r->py_exit_bytes);
            put(&o, ")");
        }
        if (r->bypassed_by[0]) {
            put(&o, ", malloc bypassed by ");
            put_command(&o, r->bypassed_by);
        }
        put(&o, ", ");
        put_fixed(&o, elapsed, 1000000000u, 2);
        put(&o, " s\n");
    }
    int fd = hl_cfg->output[0] ? open_output(hl_cfg->output, r->pid, "summary", "; writing it on stderr", 0) : -1;
    if (fd >= 0) {
        hl_write_all(fd, o.b, o.n);
        close(fd);
    } else {
        hl_stderr_write(o.b, o.n);
    }
}

/* The end of the process: the summary (unless asked not to), then the
 * region's name goes. A vfork child shares our memory under another pid,
 * and must leave both alone. */
void hl_finish(int summary)
{
    static int finished; /* a library destructor may call _exit after exit began */
    struct hl_header *r = hl_region;
    if (r == NULL || r->pid != (pid_t)syscall(SYS_getpid))
        return;
    if (__atomic_exchange_n(&finished, 1, __ATOMIC_ACQ_REL))
        return;
    if (summary) {
        hl_summary_write();
        profile_write();
    }
    hl_region_unlink_own();
}

/* At normal exit, as late as can be: after the program's atexit handlers,
 * its static destructors and every library's ELF destructors, so that what
 * they free is counted. exit() runs its handlers last registered first, and
 * the loader's _dl_fini, which runs the destructors, is registered by
 * __libc_start_main, after the libraries' constructors have run: a handler
 * registered from ours runs after it. dso NULL: with our own handle, our
 * destructor (crtstuff's __cxa_finalize) would run it early. Our destructor
 * only stands in when the handler could not be registered. */
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

static int exit_hooked;

static void at_exit(void *unused)
{
    (void)unused;
    hl_finish(1);
}

#ifdef HL_MUSL
/* musl's exit runs every atexit handler before any destructor, and ours
 * (a preloaded library needing only libc) among the last: the destructor
 * is what runs after the others. */
void hl_exit_hook(void) { (void)at_exit; }
#else
void hl_exit_hook(void) { exit_hooked = __cxa_atexit(at_exit, NULL, NULL) == 0; }
#endif

__attribute__((destructor)) static void at_unload(void)
{
    if (!exit_hooked)
        hl_finish(1);
}
