// unwindcheck.c: the shim's unwinder (preload/unwind.c, compiled in)
// against libunwind, the oracle, inside any program. Preloaded, it walks
// the stack with both at every 16th malloc and counts the walks whose
// return addresses agree. At exit it writes one line to $UNWINDCHECK_OUT:
//   walks W equal E cut C depth D
// and up to 5 disagreements after it, each as two lists of addresses.
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include "shim.h"

#define MAX 64

void *hl_raw_map(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* unwind_objects.c, compiled in too, finds the objects: through _dl_find_object,
 * or its own table when HEAPLINE_FIND_OBJECT=phdr, as in the shim. */
static struct hl_config config; /* env.c's part: this checker is the one to set it */
const struct hl_config *const hl_cfg = &config;

extern void *__libc_malloc(size_t);
static __thread int busy;
static int ready, pac;
static unsigned long calls, walks, equal, cut, depth;
static char report[8192];
static size_t used;
static int shown;

static void note(const char *what, const uint64_t *f, int n)
{
    used += snprintf(report + used, sizeof report - used, "%s", what);
    for (int i = 0; i < n && used < sizeof report - 32; i++)
        used += snprintf(report + used, sizeof report - used, " %#lx", (unsigned long)f[i]);
    used += snprintf(report + used, sizeof report - used, "\n");
}

static __attribute__((noinline)) void check(void)
{
    uint64_t ours[MAX], theirs[MAX];
    int n = hl_unwind(ours, NULL, MAX), m = 0;
    if (n < 0)
        n = -n, __atomic_add_fetch(&cut, 1, __ATOMIC_RELAXED);
    unw_context_t uc;
    unw_cursor_t c;
    if (unw_getcontext(&uc) != 0 || unw_init_local(&c, &uc) != 0)
        return;
    do {
        unw_word_t ip;
        if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0)
            break;
        theirs[m++] = ip;
    } while (m < MAX && unw_step(&c) > 0);
    // Frame 0 of each is inside check(); from frame 1 on, both are the
    // return addresses of the same frames.
    int same = n == m;
    for (int i = 1; same && i < n; i++)
        same = ours[i] == theirs[i];
    if (pac) {
        // aarch64's pac-ret (UNWINDCHECK_PAC): Debian's libunwind (1.6)
        // stops at its frames, signed or not, so a walk counts when
        // libunwind's is the shorter and every one of ours, stripped, is
        // in a loaded object.
        Dl_info info;
        same = m < n;
        for (int i = 1; same && i < n; i++)
            same = ours[i] >> 48 == 0 && dladdr((void *)(uintptr_t)(ours[i] - 1), &info) != 0;
    }
    __atomic_add_fetch(&walks, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&depth, (unsigned long)m, __ATOMIC_RELAXED);
    if (same)
        __atomic_add_fetch(&equal, 1, __ATOMIC_RELAXED);
    else if (__atomic_add_fetch(&shown, 1, __ATOMIC_RELAXED) <= 5) {
        note("ours", ours + 1, n - 1);
        note("libunwind", theirs + 1, m - 1);
    }
}

void *malloc(size_t size)
{
    void *p = __libc_malloc(size);
    if (ready && !busy && __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED) % 16 == 0) {
        busy = 1;
        check();
        busy = 0;
    }
    return p;
}

__attribute__((constructor)) static void start(void)
{
    busy = 1;
    const char *mode = getenv("HEAPLINE_FIND_OBJECT");
    config.find_object = mode != NULL && strcmp(mode, "phdr") == 0 ? HL_FIND_PHDR : HL_FIND_AUTO;
    hl_find_object_resolve();
    ready = hl_unwind_boot() == 0;
    pac = getenv("UNWINDCHECK_PAC") != NULL;
    busy = 0;
}

__attribute__((destructor)) static void done(void)
{
    const char *out = getenv("UNWINDCHECK_OUT");
    busy = 1;
    if (out == NULL)
        return;
    int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0)
        return;
    char line[128];
    int k = snprintf(line, sizeof line, "walks %lu equal %lu cut %lu depth %lu\n", walks, equal, cut, walks ? depth / walks : 0);
    (void)!write(fd, line, (size_t)k);
    (void)!write(fd, report, used);
    close(fd);
}
