/*
 * summary.c: the end of the process. Its figures, gathered once into a
 * struct hl_summary and rendered as text or JSON (summary_line.c), go to
 * stderr or HEAPLINE_OUTPUT with write(2); the region itself to
 * HEAPLINE_PROFILE. One line per run by default (see parent_runs_shim).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "shim.h"
#include "summary_line.h"

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
            struct hl_buf d = {.n = 0};
            hl_put_u64(&d, s[1] == 'p' ? (uint64_t)pid : hl_region != NULL ? hl_region->pid_ns : hl_pid_ns());
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
 * (region_grow.c), and reading them would take them from /dev/shm. */
void hl_profile_dump(void)
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
    struct hl_buf d = {.n = 0};
    hl_put(&d, prefix);
    hl_put_u64(&d, n);
    hl_put(&d, suffix);
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

/* The summary's figures, once: what the region says at exit. */
static void summary_of(struct hl_header *r, const struct hl_counters *t, uint64_t now, struct hl_summary *s)
{
    *s = (struct hl_summary){
        .pid = r->pid,
        .command = r->command,
        .exec_from = exec_from,
        .bypassed_by = r->bypassed_by,
        .mode = hl_mode_name(__atomic_load_n(&r->mode, __ATOMIC_RELAXED)),
        .elapsed_ns = now - r->start_ns,
        .live = (int64_t)(t->allocated_bytes - t->freed_bytes),
        .live_blocks = (int64_t)(t->allocs - t->frees),
        .peak = __atomic_load_n(&r->peak_live, __ATOMIC_RELAXED),
        .peak_error = r->peak_slack * r->threads_max,
        .allocs = t->allocs,
        .frees = t->frees,
        .allocated_bytes = t->allocated_bytes,
        .freed_bytes = t->freed_bytes,
        .threads = r->threads_seen,
        .mapped = __atomic_load_n(&r->mapped_bytes, __ATOMIC_RELAXED),
        .peak_mapped = __atomic_load_n(&r->peak_mapped_bytes, __ATOMIC_RELAXED),
        .mappings = __atomic_load_n(&r->mappings, __ATOMIC_RELAXED),
        .py_allocs = r->py_allocs,
        .py_frees = r->py_frees,
        .py_allocated_bytes = r->py_alloc_bytes,
        .py_freed_bytes = r->py_free_bytes,
        .py_live_objects = r->py_exit_objects,
        .py_live_bytes = r->py_exit_bytes,
    };
}

/* The region's last figures, with the flag that says they are the last;
 * then the line, unless it is not this process's to print. */
void hl_summary_write(void)
{
    struct hl_header *r = hl_region;
    struct hl_counters t;
    hl_totals(r, &t);
    hl_peak_update(r, (int64_t)(t.allocated_bytes - t.freed_bytes));
    uint64_t now = hl_now_ns();
    hl_pymalloc_live(&r->py_exit_objects, &r->py_exit_bytes); /* before the flag: readers take them with it */
    __atomic_store_n(&r->exit_ns, now, __ATOMIC_RELAXED);
    __atomic_or_fetch(&r->flags, HL_FLAG_EXITED, __ATOMIC_RELEASE);
    if (hl_cfg->summary == HL_SUMMARY_OFF || (hl_cfg->summary == HL_SUMMARY_ONE && !output_per_process(hl_cfg->output) &&
                                               parent_runs_shim()))
        return;

    static struct hl_summary s; /* static: a deep stack may be short at exit */
    static struct hl_buf o;
    summary_of(r, &t, now, &s);
    o.n = 0;
    if (hl_cfg->json)
        hl_summary_json(&o, &s);
    else
        hl_summary_text(&o, &s);
    int fd = hl_cfg->output[0] ? open_output(hl_cfg->output, r->pid, "summary", "; writing it on stderr", 0) : -1;
    if (fd >= 0) {
        hl_write_all(fd, o.b, o.n);
        close(fd);
    } else {
        hl_stderr_write(o.b, o.n);
    }
}
