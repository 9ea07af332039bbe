/*
 * keeper.c: a Go program's region goes when the program exits.
 *
 * A process that exits removes its region (summary.c, at exit and in
 * _exit). Go's runtime ends every process with its own exit_group system
 * call, on the normal return from main.main and in os.Exit alike: no
 * atexit handler, no destructor, nothing of ours runs, and the region
 * stayed behind on every run (heapctl run removed it; a plain LD_PRELOAD
 * left it for region_reap.c and gc). Nothing inside a process runs after
 * exit_group, so something outside it must: for a Go program only (its
 * executable carries the Go linker's build-id note), the shim starts one
 * small process at load, before the Go runtime has a thread, that waits
 * for the program's end and then removes the region if the program
 * exited, and leaves it if a signal killed it (the OOM-kill promise:
 * profile --peak after a SIGKILL).
 *
 * The keeper is made so that the program sees nothing of it:
 *  - a clone with no exit signal: the program gets no SIGCHLD, and wait,
 *    waitpid(-1) and Go's wait4 never return it (only __WCLONE or __WALL
 *    would); it outlives the program, and its new parent (init or a
 *    subreaper) reaps it with SIGCHLD, which the kernel restores when it
 *    reparents it;
 *  - it closes every file descriptor it was given (a pipe's write end held
 *    by it would keep a reader of the program's output from its EOF), runs
 *    in / and in a session of its own, with every signal blocked: a ^C to
 *    the program's process group, or a kill of it, does not end the keeper
 *    before the program;
 *  - its command line reads "heapline-keeper", not the program's, so
 *    pgrep -f and pkill -f find the program alone.
 *
 * It learns how the program ended from a pidfd of the program, taken by
 * the program and given to the keeper alone: PIDFD_GET_INFO's exit status
 * (Linux 6.15), which the kernel gives once the program has been reaped;
 * before 6.15, the zombie's exit status in /proc/PID/stat. The region
 * goes only once the program has been reaped: its parent may be a
 * watcher (heapctl run) that reads the counters before it reaps. A
 * kernel without pidfd_open or close_range (before 5.9): no keeper, and
 * the region stays, as it did, until region_reap.c or heapctl gc.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include "shim.h"

/* The same numbers on every architecture (the unified table from 5.1 on):
 * glibc 2.31's headers, the release's, name neither. */
#define NR_PIDFD_OPEN  434
#define NR_CLOSE_RANGE 436

/* Linux 6.15's struct pidfd_info, to exit_code: its first 72 bytes */
struct pidfd_info {
    uint64_t mask;
    uint64_t cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    int32_t exit_code;
    uint32_t coredump_mask, spare;
};
#define PIDFD_INFO_EXIT 8u
#define PIDFD_GET_INFO  (0xc0000000u | ((uint32_t)sizeof(struct pidfd_info) << 16) | (0xffu << 8) | 11u)

/* The program's executable was made by the Go linker: it carries a note
 * of owner "Go", type 4 (the Go build id), in a loaded PT_NOTE. */
static int program_is_go(void)
{
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
    unsigned long n = getauxval(AT_PHNUM);
    if (ph == NULL || n == 0)
        return 0;
    uintptr_t bias = 0;
    for (unsigned long i = 0; i < n; i++)
        if (ph[i].p_type == PT_PHDR)
            bias = (uintptr_t)ph - ph[i].p_vaddr;
    for (unsigned long i = 0; i < n; i++) {
        if (ph[i].p_type != PT_NOTE)
            continue;
        const char *p = (const char *)(bias + ph[i].p_vaddr), *end = p + ph[i].p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *nh;
            /* "Go" and its NUL padded to 4: the Go linker's namesz is 4 */
            if ((nh->n_namesz == 3 || nh->n_namesz == 4) && nh->n_type == 4 && name + 3 <= end &&
                memcmp(name, "Go", 3) == 0)
                return 1;
            p = name + ((nh->n_namesz + 3) & ~3u) + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 0;
}

static void nap(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* The zombie's wait status (/proc/PID/stat, fields 3 and 52), or -1 when
 * pid is no zombie. */
static int zombie_status(pid_t pid)
{
    char path[48] = "/proc/", buf[1024];
    strcpy(hl_decimal(path + 6, (uint32_t)pid), "/stat");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0)
        return -1;
    buf[got] = 0;
    char *p = strrchr(buf, ')');
    if (p == NULL || p[1] != ' ' || p[2] != 'Z')
        return -1;
    int field = 2;
    for (; *p && field < 52; p++)
        if (*p == ' ')
            field++;
    int v = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (*p - '0');
    return field == 52 ? v : -1;
}

/* How the program behind pidfd ended, once it has been reaped: its wait
 * status, or -1 when that cannot be told. */
static int ended(int pidfd, pid_t pid)
{
    struct pollfd pf = {pidfd, POLLIN, 0};
    while (poll(&pf, 1, -1) < 0 && errno == EINTR)
        ;
    int status = -1;
    for (int wait_ms = 1;; wait_ms = wait_ms < 1000 ? wait_ms * 2 : 1000) {
        struct pidfd_info info = {0};
        info.mask = PIDFD_INFO_EXIT;
        if (ioctl(pidfd, PIDFD_GET_INFO, &info) == 0 && (info.mask & PIDFD_INFO_EXIT))
            return info.exit_code; /* 6.15: given once reaped */
        pf.revents = 0;
        if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLHUP))
            return status; /* reaped: the zombie's, if it was read */
        int z = zombie_status(pid);
        pf.revents = 0;
        if (z >= 0 && poll(&pf, 1, 0) == 1 && !(pf.revents & POLLHUP))
            status = z; /* still that zombie: the status was its own */
        nap(wait_ms);
    }
}

/* "heapline-keeper" over the program's command line, in the keeper's copy
 * of it (/proc/self/stat fields 48 and 49: where the kernel reads it). */
static void rename_self(void)
{
    uintptr_t start = (uintptr_t)hl_stat_field("/proc/self/./stat", 48);
    uintptr_t end = (uintptr_t)hl_stat_field("/proc/self/./stat", 49);
    static const char name[] = "heapline-keeper";
    if (start == 0 || end <= start || end - start < sizeof name)
        return;
    memset((void *)start, 0, end - start);
    memcpy((void *)start, name, sizeof name);
    prctl(PR_SET_NAME, name, 0, 0, 0);
}

/* In the keeper: wait for the program, then remove its region if it
 * exited. Never returns. */
static void keep(int pidfd, pid_t pid, const char *path, uint64_t ticks)
{
    uint64_t all = ~0ull;
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, sizeof all);
    if (pidfd > 0)
        syscall(NR_CLOSE_RANGE, 0, pidfd - 1, 0);
    syscall(NR_CLOSE_RANGE, pidfd + 1, ~0u, 0);
    (void)!chdir("/");
    setsid();
    rename_self();
    /* the region's file, while it is surely the program's: only it goes */
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct hl_header h;
    struct stat st, now;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !hl_region_header_of(fd, &h, (uint64_t)pid) || h.start_ticks != ticks)) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0) {
        int status = ended(pidfd, pid);
        /* exited (a wait status with no signal), the name still holds the
         * file, nobody taking it over (region.c's flock) */
        if (status >= 0 && (status & 0x7f) == 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            fstatat(AT_FDCWD, path, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st.st_dev &&
            now.st_ino == st.st_ino) {
            /* its counters are final, as after the shim's own exit: a
             * reader holding the file (export) takes it for an exit, not
             * a kill */
            uint32_t flags = HL_FLAG_EXITED;
            if (pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h)
                flags |= h.flags;
            (void)!pwrite(fd, &flags, sizeof flags, __builtin_offsetof(struct hl_header, flags));
            unlink(path);
        }
    }
    syscall(SYS_exit_group, 0);
    for (;;)
        ;
}

/* At load, once the region exists: a Go program's keeper. path is the
 * region's name. */
void hl_keeper_start(const char *path)
{
    if (hl_region == NULL || !program_is_go())
        return;
    pid_t pid = (pid_t)syscall(SYS_getpid);
    int pidfd = (int)syscall(NR_PIDFD_OPEN, pid, 0); /* close-on-exec, always */
    if (pidfd < 0)
        return; /* before 5.3: the region stays, as it did */
    /* no exit signal: not a child the program can wait for (see the top);
     * the raw clone runs no atfork handler (ours would give the keeper a
     * region) */
    long k = syscall(SYS_clone, 0L, 0L, 0L, 0L, 0L);
    if (k == 0)
        keep(pidfd, pid, path, hl_region->start_ticks);
    close(pidfd);
    if (k < 0)
        hl_say("cannot start the process that removes this Go program's region when it exits: it will stay until heapctl gc", NULL);
}
