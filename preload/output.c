/*
 * output.c: where the shim's own words go, the exit summary and its
 * one-line messages, without harming the program that carries it.
 *
 * - Only to the stderr the program started with: a program that closed fd 2
 *   and opened a data file, which then got fd 2, must not find our line in
 *   its data. boot() notes fd 2's file and its path; a write checks it is
 *   still the one, or opens the path again for the one write when the
 *   program closed it (coreutils do, at exit).
 * - A reader that closed the pipe must not kill the program with SIGPIPE
 *   at exit: SIGPIPE is blocked around the write, and one it raised is
 *   taken back.
 * - A full pipe nobody reads must not hold the program at exit for ever:
 *   the write waits about a second in all, then gives the rest up.
 *
 * All with write(2) and a static line: stdio may allocate and lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "shim.h"

#define WAIT_NS 1000000000ull /* the longest a summary may hold up an exit */

static dev_t err_dev;
static ino_t err_ino;
static int err_state; /* 0: not noted yet; 1: fd 2 noted; -1: fd 2 was not open */
static char err_path[256]; /* what fd 2 named at start, "" when it has no path (a pipe) */

void hl_stderr_note(void)
{
    struct stat st;
    if (fstat(2, &st) == 0) {
        err_dev = st.st_dev;
        err_ino = st.st_ino;
        err_state = 1;
        /* A setuid program would open the path with its own rights, for
         * a user who may not write there, and who also picks the line's
         * argv[0] (a root-owned file gained a line so, once): no path,
         * so the line goes to fd 2 itself or nowhere. */
        if (getauxval(AT_SECURE))
            return;
        /* Only a path can be opened again: a pipe or socket reads
         * "pipe:[123]", and one deleted since ends in " (deleted)", which
         * the inode check at exit turns away. */
        /* syscall(), not readlink(): the shim calls syscall() at boot
         * anyway, and a first call through readlink's PLT entry costs
         * the dynamic linker's lookup, some 2,000 instructions at every
         * program's start (callgrind). */
        ssize_t n = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/fd/2", err_path, sizeof err_path - 1);
        err_path[n > 0 && err_path[0] == '/' ? n : 0] = 0;
    } else {
        err_state = -1;
    }
}

/* fd 2 is still the file noted at start (or nothing was noted: a message
 * before boot). */
int hl_stderr_ok(void)
{
    if (err_state == 0)
        return 1;
    struct stat st;
    return err_state == 1 && fstat(2, &st) == 0 && st.st_dev == err_dev && st.st_ino == err_ino;
}

/* Our line on the stderr the program started with. coreutils close fd 2
 * at exit (gnulib's close_stdout), before our summary, and `ls` would
 * print nothing: then the path fd 2 named at start is opened again, for
 * this one write, if it still names that very file (a terminal, a log
 * file). The descriptor lives for the write only, close-on-exec, and is
 * never fd 2 itself: a closed fd 2 is the lowest free one, so it is moved
 * up first. A pipe has no path: its line is lost. */
void hl_stderr_write(const char *p, size_t n)
{
    if (hl_stderr_ok()) {
        hl_write_all(2, p, n);
        return;
    }
    if (err_state != 1 || err_path[0] == 0)
        return;
    int fd = open(err_path, O_WRONLY | O_APPEND | O_NOCTTY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0 && fd <= 2) {
        /* the program's standard descriptors stay closed as it left them */
        int up = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        fd = up;
    }
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_dev == err_dev && st.st_ino == err_ino)
        hl_write_all(fd, p, n);
    close(fd);
}

void hl_write_all(int fd, const char *p, size_t n)
{
    int saved = errno;
    sigset_t pipe_only, old, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    int had_pipe = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);

    uint64_t deadline = hl_now_ns() + WAIT_NS;
    while (n > 0) {
        uint64_t now = hl_now_ns();
        if (now >= deadline)
            break;
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int ready = poll(&pfd, 1, (int)((deadline - now) / 1000000) + 1);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            break;
        ssize_t w = write(fd, p, n);
        if (w < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (w <= 0)
            break; /* EPIPE and the like: the line is lost, the program is not */
        p += w;
        n -= (size_t)w;
    }

    if (!had_pipe && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
        static const struct timespec now = {0, 0};
        sigtimedwait(&pipe_only, NULL, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
}

/* One line on stderr. The parts end with NULL. */
/* v in decimal at p (room for 20 digits); returns the end. */
char *hl_decimal(char *p, uint64_t v)
{
    char digits[20];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = digits[--n];
    return p;
}

void hl_say(const char *first, ...)
{
    char line[512] = "heapline: ";
    size_t n = 10;
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s != NULL; s = va_arg(ap, const char *))
        for (; *s && n < sizeof line - 1; s++)
            line[n++] = *s;
    va_end(ap);
    line[n++] = '\n';
    hl_stderr_write(line, n);
}
