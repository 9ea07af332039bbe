/*
 * region.c: the shared-memory region: making it, naming it, mapping it.
 * What lays out parts of it, and when, is lifecycle.c's.
 *
 * /dev/shm/heapline.<pid> is created with O_CREAT|O_EXCL|O_NOFOLLOW and mode
 * 0600, so a file or symlink planted at that name is never followed or
 * written. The one file we do take over is our own: a region whose header
 * names this pid and this process's start time was left by an earlier image
 * of this very process (exec keeps the pid), and one with a pid but another
 * start time by a dead process whose pid we were given, unless its header
 * names another pid namespace: then the same pid is another process's. A
 * name taken by anything not ours sends us to the next name
 * (hl_region_open): heapline.<pid>.<our pid namespace's inode>, then that
 * and a random suffix.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include "shim.h"

/* The one check of what a region file holds, for region.c's takeover,
 * region_reap.c's dead regions and summary.c's parent: each adds the fields it
 * judges by (the start time, the namespace, the link count). */

/* fd is a file we could have made a region in: a regular file of our
 * uid, mode 0600. */
int hl_region_file_ours(int fd, struct stat *st)
{
    return fstat(fd, st) == 0 && S_ISREG(st->st_mode) && st->st_uid == geteuid() && (st->st_mode & 0777) == 0600;
}

/* The header at fd's start, read into *h, is a whole region header of
 * process pid (a pid in the namespace h->pid_ns names). */
int hl_region_header_of(int fd, struct hl_header *h, uint64_t pid)
{
    return pread(fd, h, sizeof *h, 0) == (ssize_t)sizeof *h && h->magic == HL_MAGIC &&
           (uint64_t)(uint32_t)h->pid == pid;
}

struct hl_header *hl_region;
static size_t region_len;

uint64_t hl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static pid_t raw_getpid(void) { return (pid_t)syscall(SYS_getpid); }

/* A region's path, of any of the three forms (hl_region_open), with room. */
#define HL_NAME_MAX 96

/* "/dev/shm/heapline.<pid>" into buf (HL_NAME_MAX bytes), or with ns not 0
 * "/dev/shm/heapline.<pid>.<ns>": the name of a process whose pid is taken
 * by a process of another pid namespace sharing this /dev/shm. */
static void region_path(char *buf, pid_t pid, uint64_t ns)
{
    static const char prefix[] = HL_PATH_PREFIX;
    memcpy(buf, prefix, sizeof prefix - 1);
    char *p = hl_decimal(buf + sizeof prefix - 1, (uint32_t)pid);
    if (ns != 0) {
        *p++ = '.';
        p = hl_decimal(p, ns);
    }
    *p = 0;
}

static char region_file[HL_NAME_MAX]; /* the name this image publishes under */

static const char *errno_text(int e)
{
    switch (e) {
    case ELOOP: return "it is a symlink";
    case EACCES: return "permission denied";
    case ENOENT: return "no such directory";
    case ENOSPC: return "no space left";
    case EROFS: return "read-only file system";
    case EMFILE: case ENFILE: return "too many open files";
    case ENOMEM: return "out of memory";
    case EEXIST: return "it exists";
    default: return "system error";
    }
}

/* The inode of one of our namespaces ("/proc/self/ns/pid"), 0 if /proc
 * cannot say. */
static uint64_t ns_inode(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Our pid namespace's: the pid in our region's name is a pid there. */
uint64_t hl_pid_ns(void) { return ns_inode("/proc/self/ns/pid"); }

/* heapctl gc removes a stale or detached region only while it holds this
 * lock (where flock works); after exec, our earlier image's region is
 * valid and mapped by nobody, detached, until we have taken it over.
 * Taking it over, we hold the lock from before we look at the file until
 * we have emptied it, so gc never removes a file we are taking. Held
 * elsewhere for over a second, something is wrong: -1, and the file is
 * left alone. A file system without flock: 0, as before. */
static int lock_region(int fd)
{
    /* a second of the clock, not a count of naps: on a loaded machine
     * 1,000 naps of 1 ms took longer than the holder's 1.5 s
     * (TestExecTakeOverLocked) */
    for (uint64_t start = hl_now_ns(); hl_now_ns() - start < 1000000000u;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 || (errno != EWOULDBLOCK && errno != EINTR))
            return 0;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return -1;
}

/* A region file whose magic was never stored, last written over 10 s ago:
 * its maker, a process with our pid (there is one at a time), was killed
 * between creating it and storing its header, and the name would
 * otherwise be lost to every later process given that pid. A region being
 * made now (by a process with our pid in another pid namespace) is a few
 * microseconds old. */
static int abandoned(int fd, const struct stat *st)
{
    uint64_t magic = 1;
    struct timespec now;
    ssize_t n = pread(fd, &magic, sizeof magic, 0);
    if (n == 0)
        magic = 0; /* empty: ftruncate never came */
    else if (n != (ssize_t)sizeof magic)
        magic = 1;
    return magic == 0 && clock_gettime(CLOCK_REALTIME, &now) == 0 && now.tv_sec - st->st_mtim.tv_sec > 10;
}

/* The command of an earlier image of this process, before exec, whose
 * region we took over; "" if none. */
static char earlier[HL_COMMAND_MAX];

const char *hl_region_earlier(void) { return earlier; }

/* A new region file at path, where there is none now; -1 and *why if
 * not. */
static int create_fresh(const char *path, const char **why)
{
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        *why = errno_text(errno);
    return fd;
}

/* The name is taken. Take it over only if it is ours (see the top);
 * otherwise set *why and return -1: hl_region_open then tries a name of
 * its own. Nothing else planted there (a symlink, a file that is not a
 * region, another user's file, which cannot be read to tell, the region
 * of another pid namespace's process) is written or removed. */
static int take_over(const char *path, pid_t pid, uint64_t ticks, uint64_t ns, const char **why)
{
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        (st.st_mode & 0777) == 0600) {
        if (lock_region(fd) != 0) {
            close(fd);
            *why = "the region's file is locked by another process";
            return -1;
        }
        if (fstat(fd, &st) == 0 && st.st_nlink == 0) {
            close(fd); /* heapctl gc removed it meanwhile */
            fd = -1;
            errno = ENOENT;
        }
    }
    if (fd < 0 && errno == ENOENT)
        return create_fresh(path, why); /* removed since our O_EXCL open: by our earlier image's exit, or by heapctl gc */
    if (fd < 0) {
        *why = errno == ELOOP ? "a symlink is planted at that name" : "it exists and cannot be opened";
        return -1;
    }
    struct hl_header h;
    if (hl_region_file_ours(fd, &st) && st.st_nlink == 1 && abandoned(fd, &st)) {
        close(fd); /* a process with our pid died making it */
        if (unlink(path) != 0 && errno != ENOENT) {
            *why = errno_text(errno);
            return -1;
        }
        return create_fresh(path, why);
    }
    if (!hl_region_file_ours(fd, &st) || st.st_nlink != 1 || !hl_region_header_of(fd, &h, (uint64_t)pid)) {
        close(fd);
        *why = "a file that is not this process's region is at that name";
        return -1;
    }
    if (h.pid_ns != 0 && h.pid_ns != ns) { /* ns is known: hl_region_open checked */
        /* Our pid, in another pid namespace that shares this /dev/shm
         * (containers of one Kubernetes pod do): whether that process
         * lives cannot be told from here, so its region stays, and ours
         * takes a name of its own (hl_region_open). */
        close(fd);
        *why = "the region of a process with this pid in another pid namespace is at that name";
        return -1;
    }
    if (h.start_ticks == ticks) {
        memcpy(earlier, h.command, sizeof earlier); /* our summary names what we were (lifecycle.c) */
        earlier[sizeof earlier - 1] = 0;
        if (ftruncate(fd, 0) == 0) /* an earlier image of us, before exec: start afresh */
            return fd;
    } else if (unlink(path) == 0) { /* left by a dead process with our pid */
        close(fd);
        return create_fresh(path, why);
    }
    *why = errno_text(errno);
    close(fd);
    return -1;
}

/* Give the region's len bytes at `at` their pages now. ftruncate only
 * makes a sparse file: on a full /dev/shm the first store into a page
 * nobody backs is a SIGBUS, in the program, at its first allocation.
 * Reserved here, a full /dev/shm is an error we can report; the other
 * slots and the tables take theirs as they fill (region_grow.c). A file system
 * that cannot reserve (not tmpfs) is left as it was. */
static int reserve(int fd, off_t at, size_t len)
{
    if (fallocate(fd, 0, at, (off_t)len) == 0 || errno == EOPNOTSUPP || errno == ENOSYS)
        return 0;
    return -1;
}

/* Create the region's file at path, or take it over (take_over); set *why
 * when neither can be done. */
static int open_name(const char *path, pid_t pid, uint64_t ticks, uint64_t ns, const char **why, int *taken)
{
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    *taken = 0;
    if (fd < 0 && errno == EEXIST) {
        fd = take_over(path, pid, ticks, ns, why);
        *taken = fd < 0;
        return fd;
    }
    if (fd < 0)
        *why = errno_text(errno);
    return fd;
}

/* 16 hex digits from the kernel's random pool, or from the clock where
 * it has none (before 3.17); never from AT_RANDOM, which seeds the stack
 * protector's canary: a name in /dev/shm is for all to read. */
static char *random_hex(char *p)
{
    uint64_t v = 0;
    if (syscall(SYS_getrandom, &v, sizeof v, 1 /* GRND_NONBLOCK */) != (long)sizeof v)
        v = hl_now_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&v;
    for (int i = 60; i >= 0; i -= 4)
        *p++ = "0123456789abcdef"[(v >> i) & 15];
    *p = 0;
    return p;
}

/* Our earlier image's region (before exec) under a name of the third
 * form, heapline.<pid>.<ns>.<random>, taken over as take_over takes one:
 * its fd with the name in path, or -1. At most 16 such names are looked
 * at: whoever planted the first two names may plant many of these. */
static int earlier_image(char *path, pid_t pid, uint64_t ticks, uint64_t ns)
{
    char prefix[HL_NAME_MAX];
    region_path(prefix, pid, ns);
    size_t at = strlen(prefix);
    prefix[at++] = '.';
    prefix[at] = 0;
    const char *base = prefix + sizeof "/dev/shm/" - 1;
    size_t blen = at - (sizeof "/dev/shm/" - 1);
    int dir = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return -1;
    int fd = -1, looked = 0;
    char buf[4096];
    long got;
    while (fd < 0 && looked < 16 && (got = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long off = 0; off < got && fd < 0 && looked < 16;) {
            struct dirent64 *d = (struct dirent64 *)(buf + off);
            off += d->d_reclen;
            if (strncmp(d->d_name, base, blen) != 0 || strlen(d->d_name + blen) != 16)
                continue;
            looked++;
            memcpy(path, prefix, at);
            memcpy(path + at, d->d_name + blen, 17);
            const char *why;
            fd = take_over(path, pid, ticks, ns, &why); /* ours, or left as it is */
        }
    }
    close(dir);
    return fd;
}

/* The region's file under the first name of the three that is free or
 * ours (hl_region_open), its name in path; -1 when none is, said in one
 * line. */
static int open_named(char *path, pid_t pid, uint64_t ticks, uint64_t ns)
{
    const char *why = NULL;
    int taken = 0;
    int fd = open_name(path, pid, ticks, ns, &why, &taken);
    if (fd < 0 && taken) {
        char first[HL_NAME_MAX];
        const char *first_why = why;
        memcpy(first, path, sizeof first);
        region_path(path, pid, ns);
        fd = open_name(path, pid, ticks, ns, &why, &taken);
        if (fd < 0 && taken)
            fd = earlier_image(path, pid, ticks, ns);
        for (int i = 0; fd < 0 && taken && i < 4; i++) {
            region_path(path, pid, ns);
            size_t at = strlen(path);
            path[at++] = '.';
            random_hex(path + at);
            fd = open_name(path, pid, ticks, ns, &why, &taken);
        }
        if (fd < 0) {
            hl_say(first, ": ", first_why, "; ", path, ": ", why, "; running unprofiled", NULL);
            return -1;
        }
    }
    if (fd < 0) {
        hl_say(path, ": ", why, "; running unprofiled", NULL);
        return -1;
    }
    return fd;
}

/* A new region's header, all but the magic (hl_region_publish). */
static void fill_header(struct hl_header *r, size_t len, pid_t pid, uint64_t ticks, uint64_t ns)
{
    r->version = HL_VERSION;
    r->header_size = HL_HEADER_SIZE;
    r->slot_size = HL_SLOT_SIZE;
    r->nslots = hl_cfg->slots;
    r->region_size = len;
    r->pid = pid;
    r->uid = geteuid();
    r->start_ticks = ticks;
    r->pid_ns = ns;
    r->time_ns = ns_inode("/proc/self/ns/time");
    r->start_ns = hl_now_ns();
    /* unpublished at most: a fast word's 256 KiB and a slow-path batch */
    r->peak_slack = hl_cfg->peak_batch ? HL_WORD_BATCH + hl_cfg->peak_batch : 0;
    hl_command_read(r->command, sizeof r->command);
    r->mode = hl_mode; /* a fork's child keeps its parent's; at boot, the mode boot chose */
}

/* Create and map this process's region; 0 on success. On failure say why
 * in one line on stderr; the caller then runs the program unprofiled.
 *
 * The name is the first of these that is free or ours (take_over):
 * heapline.<pid>, then heapline.<pid>.<ns> (ns our pid namespace's inode),
 * then heapline.<pid>.<ns>.<16 random hex digits>. The second is for a
 * process of another pid namespace with our pid (the containers of one
 * Kubernetes pod share /dev/shm, each with its pid 1); the third for
 * names anyone could create ahead of us, for pids not yet given out, to
 * keep those processes unprofiled: they cannot guess it. Readers look in
 * the same order (ctl/internal/regions, inspectPID). */
static struct hl_header *made; /* by hl_region_open, until hl_region_publish */

int hl_region_open(size_t profile_len, size_t arenas_len, size_t *profile_at, size_t *arenas_at)
{
    char path[HL_NAME_MAX];
    pid_t pid = raw_getpid();
    uint64_t ticks = hl_start_ticks(), ns = hl_pid_ns();
    region_path(path, pid, 0);
    if (ticks == 0 || ns == 0) {
        /* Without them a region under our pid could be ours or another
         * live process's (a container's that shares /dev/shm), and ours
         * could not be told from a dead one's by anyone: run unprofiled. */
        hl_say("/proc/self cannot be read (no /proc?): this process's start time and pid namespace are unknown; running unprofiled", NULL);
        return -1;
    }
    /* First, and whether or not ours can be made: on a full /dev/shm
     * the dead are what fills it. */
    hl_reap_dead(ns);

    int fd = open_named(path, pid, ticks, ns);
    if (fd < 0)
        return -1;
    size_t slots_end = HL_HEADER_SIZE + (size_t)hl_cfg->slots * HL_SLOT_SIZE;
    *profile_at = slots_end;
    *arenas_at = slots_end + profile_len;
    size_t len = *arenas_at + arenas_len;
    /* the header, the first page of slots and the profile's catch-all
     * stack now; the rest as it fills (region_grow.c) */
    size_t reserved = HL_HEADER_SIZE + HL_SLOT_SIZE;
    off_t catch_all = profile_len ? (off_t)slots_end : -1;
    void *m = MAP_FAILED;
    const char *step = NULL;
    if (fchmod(fd, 0600) != 0)
        step = ": cannot set its mode: ";
    else if (ftruncate(fd, (off_t)len) != 0 || reserve(fd, 0, reserved) != 0 ||
             (catch_all >= 0 && reserve(fd, catch_all, sizeof(struct hl_stack)) != 0))
        step = ": cannot give it room: ";
    else if ((m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
        step = ": cannot map it: ";
    else if (hl_grow_start(m, reserved, len) != 0 && reserve(fd, 0, len) != 0) /* no growth on demand here */
        step = ": cannot give it room: ";
    else
        (void)hl_grow(HL_TABLE_SLOTS, HL_HEADER_SIZE, reserved); /* its mark: the page reserved */
    int err = errno;
    /* A flock belongs to the open file, which the mapping keeps open:
     * closing fd alone would hold take_over's lock for this image's life. */
    flock(fd, LOCK_UN);
    close(fd);
    if (step != NULL) {
        if (m != MAP_FAILED)
            munmap(m, len);
        unlink(path);
        hl_say(path, step, errno_text(err), "; running unprofiled", NULL);
        return -1;
    }

    fill_header(m, len, pid, ticks, ns);
    region_len = len;
    memcpy(region_file, path, sizeof region_file);
    made = m;
    return 0;
}

/* The region hl_region_open made, with its parts laid out (lifecycle.c),
 * for readers: the magic last, so that a reader never takes a half-made
 * header for a region; then for the shim. */
struct hl_header *hl_region_made(void) { return made; }

void hl_region_publish(void)
{
    __atomic_store_n(&made->magic, HL_MAGIC, __ATOMIC_RELEASE);
    hl_region = made;
}

size_t hl_region_len(void) { return region_len; }
const char *hl_region_name(void) { return region_file; }

/* Remove our region's name, if it is ours: a vfork child shares our memory
 * but has a pid of its own, and must leave its parent's region alone. */
void hl_region_unlink_own(void)
{
    struct hl_header *r = hl_region;
    if (r == NULL || r->pid != raw_getpid())
        return;
    unlink(region_file);
}

/* In a fork child: the parent's region, not unmapped but replaced by
 * private memory, never touched unless by this. A signal handler that
 * forks between a fast path's load of the thread's slot and its add to
 * it (count_glibc.h: one instruction apart) returns, in the child, to
 * that add into the parent's slot: unmapped, the child would fault; still
 * shared, the child's operation would count in the parent's slot, racing
 * the parent's thread. Here it is lost: one operation of the child
 * uncounted (forkstep.c). The cost is the address range, kept reserved
 * in the child, and no instruction on the fast path. */
void hl_region_forget(void *old, size_t len)
{
    long p = syscall(SYS_mmap, old, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (p != (long)old)
        munmap(old, len);
}
