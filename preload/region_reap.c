/*
 * region_reap.c: a bound on what dead processes' regions hold.
 *
 * /dev/shm is memory, and a region is reserved whole (region.c): about
 * 660 KiB with the profile's tables. A process that exits removes its
 * region; one that is killed (the OOM killer's SIGKILL) leaves it, on
 * purpose, so that its counters and profile can be read after its death,
 * until heapctl gc. On a machine where processes are killed all day those
 * would add up (after one run of CPython's test suite, 151 dead regions
 * held 98 MB), so each new region removes the dead ones beyond the
 * HL_DEAD_KEEP seen dead most recently.
 *
 * "Dead" is gc's rule, kept narrow: a region of our uid and our pid
 * namespace whose pid no process holds (kill(pid, 0) fails with ESRCH). A
 * region is stamped with the time it was first seen dead (dead_seen_ns),
 * and the oldest stamps go first: a server killed after a week of running
 * is the newest dead, not the oldest. Removal takes the file's flock, as
 * gc does, so a region being taken over after exec is never removed.
 *
 * This runs once, at start, with no lock of ours held; its file
 * descriptors are closed before it returns.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include "shim.h"

#define HL_DEAD_KEEP 16
#define CANDIDATES   64

struct dead {
    uint64_t seen;
    uint64_t dev, ino; /* the file judged dead: only it is removed */
    char name[64];     /* heapline.<pid>.<ns>.<16 hex digits> fits */
};

/* "heapline.<pid>", "heapline.<pid>.<ns>" or
 * "heapline.<pid>.<ns>.<random>" (region.c): the pid, or 0. */
static pid_t pid_of(const char *name)
{
    static const char prefix[] = "heapline.";
    if (strncmp(name, prefix, sizeof prefix - 1) != 0)
        return 0;
    uint64_t v = 0;
    const char *p = name + sizeof prefix - 1;
    for (; *p >= '0' && *p <= '9' && v < (1u << 22); p++)
        v = v * 10 + (uint64_t)(*p - '0');
    return (*p == 0 || *p == '.') && v > 0 && v < (1u << 22) ? (pid_t)v : 0;
}

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Open a candidate and check it is a dead region of ours: its fd, with
 * its stamp in *seen (stamped now if it had none), or -1. */
static int open_dead(int dir, const char *name, pid_t pid, uint64_t ns, struct dead *out)
{
    int fd = openat(dir, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    struct hl_header h;
    if (!hl_region_file_ours(fd, &st) || !hl_region_header_of(fd, &h, (uint64_t)pid) || h.pid_ns != ns) {
        close(fd);
        return -1;
    }
    out->seen = h.dead_seen_ns;
    out->dev = st.st_dev;
    out->ino = st.st_ino;
    if (out->seen == 0) {
        out->seen = wall_ns();
        (void)!pwrite(fd, &out->seen, sizeof out->seen, __builtin_offsetof(struct hl_header, dead_seen_ns));
    }
    return fd;
}

/* Remove the file judged dead, if the name still holds it. In the
 * sticky /dev/shm only its owner (us) or root can rename or remove it
 * meanwhile; root's process (a setuid one) can also remove anyone's, so
 * the name is checked to hold that very file, still ours, under the lock,
 * right before the unlink. */
static void remove_dead(int dir, const struct dead *d, pid_t pid)
{
    int fd = openat(dir, d->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st, now;
    /* held: its process's next image is taking it over (region.c) */
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && hl_region_file_ours(fd, &st) && st.st_dev == d->dev &&
        st.st_ino == d->ino && fstatat(dir, d->name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == d->dev &&
        now.st_ino == d->ino && kill(pid, 0) != 0 && errno == ESRCH)
        unlinkat(dir, d->name, 0);
    close(fd); /* and with it the lock */
}

void hl_reap_dead(uint64_t ns)
{
    int dir = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return;
    struct dead found[CANDIDATES];
    int n = 0;
    char buf[4096];
    long got;
    while ((got = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long off = 0; off < got;) {
            struct dirent64 *d = (struct dirent64 *)(buf + off);
            off += d->d_reclen;
            pid_t pid = pid_of(d->d_name);
            if (pid == 0 || strlen(d->d_name) >= sizeof found[0].name || kill(pid, 0) == 0 || errno != ESRCH)
                continue;
            struct dead one;
            int fd = open_dead(dir, d->d_name, pid, ns, &one);
            if (fd < 0)
                continue;
            close(fd);
            uint64_t seen = one.seen;
            /* keep the CANDIDATES newest: a full list drops its oldest */
            int at = n < CANDIDATES ? n++ : -1;
            if (at < 0) {
                at = 0;
                for (int i = 1; i < n; i++)
                    if (found[i].seen < found[at].seen)
                        at = i;
                if (found[at].seen > seen)
                    continue; /* older than all kept: next time */
            }
            found[at] = one;
            strcpy(found[at].name, d->d_name);
        }
    }
    /* remove all but the HL_DEAD_KEEP newest of those found */
    for (int kept = n; kept > HL_DEAD_KEEP; kept--) {
        int old = -1;
        for (int i = 0; i < n; i++)
            if (found[i].name[0] != 0 && (old < 0 || found[i].seen < found[old].seen))
                old = i;
        remove_dead(dir, &found[old], pid_of(found[old].name));
        found[old].name[0] = 0;
    }
    close(dir);
}
