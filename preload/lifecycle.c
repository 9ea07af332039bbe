/*
 * lifecycle.c: the shim's life in one place, each stage over an ordered
 * table of the subsystems' hooks, as jemalloc's prefork and postfork call
 * every module from one place: the region's start (made and mapped by
 * region.c, its parts laid out by the subsystems that own them), the
 * start of every subsystem at boot and at load, fork (the atfork trio,
 * and _Fork's path through the same table) and exit. Boot (boot.c)
 * chooses the mode and publishes it; what starts in each mode, and in
 * what order, is the start table's.
 */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "shim.h"

// ---- start ------------------------------------------------------------------------

/* A region for this process, at boot or in a fork child: made and mapped,
 * the profile's tables and pymalloc's arena table laid out in it, then
 * published, then the mapped counters as they are. 0 on success;
 * otherwise region.c said why. */
int hl_region_start(void)
{
    size_t profile_at, arenas_at;
    int err = hl_region_open(hl_profile_size(), hl_pymalloc_table_size(), &profile_at, &arenas_at);
    if (hl_region_earlier()[0])
        hl_summary_exec_from(hl_region_earlier());
    if (err != 0)
        return err;
    struct hl_header *r = hl_region_made();
    hl_profile_attach(r, profile_at);
    hl_pymalloc_attach(r, arenas_at);
    hl_region_publish();
    hl_mapped_publish();
    return 0;
}

static void keeper_start(void) { hl_keeper_start(hl_region_name()); }

/* One subsystem's start, and the stages it runs in (HL_START_*). must
 * stops the stage when it fails; run cannot fail. */
struct start_hook {
    int (*must)(void);
    void (*run)(void);
    unsigned stages;
};

#define BOOTED (HL_START_BYPASSED | HL_START_COUNTING)

/* Down the table, the stage's own hooks.
 *
 * At boot (boot.c, boot): once the mode is chosen, and before it is
 * published, so that a thread that sees the mode's table or the real
 * malloc finds every start done (boot.c, the order of publication).
 * - The region first: the others lay their parts out in it or count
 *   into it, and without it the mode is off (boot.c).
 * - The exit key (hl_thread_init), counting: a thread that registered
 *   before it existed never folded its slot.
 * - The atfork trio in both modes with a region: a fork child needs one
 *   of its own, bypassed too (mapped memory is counted there).
 * - The sampler, counting, after the region: its unwinder, its arena,
 *   the stack table the region's start attached, and the booting
 *   thread's first point.
 *
 * At load (the constructor, after boot), in any mode: each does nothing
 * without a region, and none needs another.
 * - The loading thread into the region: a program that has not
 *   allocated yet reads as one thread.
 * - The exit hook, from a constructor so that it runs after every
 *   library's destructors (hl_exit_hook).
 * - pymalloc's wrapper, before main: before Python runs (py_pymalloc.c).
 * - A Go program's keeper, before main: a Go runtime has no thread yet
 *   (keeper.c). */
static const struct start_hook start_hooks[] = {
    {hl_region_start, NULL, BOOTED},
    {NULL, hl_thread_init, HL_START_COUNTING},
    {NULL, hl_fork_init, BOOTED},
    {NULL, hl_profile_boot, HL_START_COUNTING},
    {NULL, hl_thread_enter, HL_START_LOAD},
    {NULL, hl_exit_hook, HL_START_LOAD},
    {NULL, hl_pymalloc_install, HL_START_LOAD},
    {NULL, keeper_start, HL_START_LOAD},
};

int hl_lifecycle_start(unsigned stage)
{
    for (size_t i = 0; i < sizeof start_hooks / sizeof start_hooks[0]; i++) {
        const struct start_hook *h = &start_hooks[i];
        if (!(h->stages & stage))
            continue;
        if (h->must != NULL) {
            int err = h->must();
            if (err != 0)
                return err;
        } else {
            h->run();
        }
    }
    return 0;
}

// ---- fork ------------------------------------------------------------------------
/* jemalloc's trio. prepare takes the parent's totals as the fork happens
 * (exact when the parent's other threads are quiescent); the child then
 * publishes its own region, starting from them, and never writes the
 * parent's slots (heaptrack's "two processes writing to the same file"). */

/* One fork's state: the parent's totals and peak as it forks. */
struct fork {
    struct hl_counters totals;
    uint64_t peak;
};

static int forked; /* this image is a fork child: exec starts a new image, and clears it */

int hl_forked_child(void) { return forked; }

static void totals_take(struct fork *f)
{
    if (hl_region != NULL) {
        hl_totals(hl_region, &f->totals);
        f->peak = __atomic_load_n(&hl_region->peak_live, __ATOMIC_RELAXED);
    }
}

/* In the child: a region of its own, from the parent's totals. */
static void child_start(struct fork *f)
{
    struct hl_header *old = hl_region;
    size_t old_len = hl_region_len();
    forked = 1;
    hl_thread_forget();
    hl_profile_fork_child();
    if (old == NULL)
        return;
    hl_region = NULL; /* until ours exists, nothing is counted */
    int made = hl_region_start();
    if (made == 0)
        hl_profile_inherit(old);
    hl_pymalloc_inherit(old); /* before it goes: its words move here, or to none */
    hl_region_forget(old, old_len);
    if (made != 0) {
        hl_set_mode_off(NULL);
        return;
    }
    struct hl_header *r = hl_region;
    r->retired = f->totals;
    int64_t live = (int64_t)(f->totals.allocated_bytes - f->totals.freed_bytes);
    r->published_live = live;
    r->peak_live = f->peak > (uint64_t)live ? f->peak : (uint64_t)live;
    r->epoch_peak = r->peak_live; /* never above it (count_thread.c, epoch_raise) */
}

static void mapped_prepare(struct fork *f) { (void)f, hl_mapped_fork_prepare(); }
static void mapped_done(struct fork *f) { (void)f, hl_mapped_fork_done(); }
static void objects_prepare(struct fork *f) { (void)f, hl_objects_fork_prepare(); }
static void objects_done(struct fork *f) { (void)f, hl_objects_fork_done(); }

struct fork_hooks {
    void (*prepare)(struct fork *), (*parent)(struct fork *), (*child)(struct fork *);
};

/* prepare runs down the table, parent and child up it. The map lock
 * before the objects' table: a thread interrupted inside its own mmap
 * (holding the map lock) by a handler that forks must get past both,
 * while another forking thread that holds the table waits for the map
 * lock (TestMapForkFromHandler hung with the other order). The totals
 * last, the child's region once both are let go. */
static const struct fork_hooks fork_hooks[] = {
    {NULL, NULL, child_start},
    {mapped_prepare, mapped_done, mapped_done},
    {objects_prepare, objects_done, objects_done},
    {totals_take, NULL, NULL},
};
#define NHOOKS (sizeof fork_hooks / sizeof fork_hooks[0])

static void run_prepare(struct fork *f)
{
    for (size_t i = 0; i < NHOOKS; i++)
        if (fork_hooks[i].prepare != NULL)
            fork_hooks[i].prepare(f);
}

static void run_after(struct fork *f, int child)
{
    for (size_t i = NHOOKS; i-- > 0;) {
        void (*hook)(struct fork *) = child ? fork_hooks[i].child : fork_hooks[i].parent;
        if (hook != NULL)
            hook(f);
    }
}

static struct fork atfork; /* the atfork handlers' fork */

static void fork_prepare(void) { run_prepare(&atfork); }
static void fork_parent(void) { run_after(&atfork, 0); }
static void fork_child(void) { run_after(&atfork, 1); }

/* glibc's _Fork (2.34) forks without the atfork handlers: its child would
 * go on counting into its parent's slots, and have no region. Ours
 * (override.c's _Fork comes here) runs the same table, with the totals on
 * its stack. glibc's own fork calls its _Fork directly, not through us. */
pid_t hl_fork_unhandled(void)
{
    if (hl_next_sys.fork == NULL)
        hl_boot();
    if (hl_next_sys.fork == NULL) {
        errno = ENOSYS;
        return -1;
    }
    struct fork f = {{0}, 0};
    run_prepare(&f);
    pid_t pid = hl_next_sys.fork();
    run_after(&f, pid == 0);
    return pid;
}

void hl_fork_init(void)
{
    if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0)
        hl_say("pthread_atfork failed: fork children will not be profiled", NULL);
}

// ---- exit ------------------------------------------------------------------------

/* The end of the process: the summary and the profile's dump (unless
 * asked not to), then the region's name goes. A vfork child shares our
 * memory under another pid, and must leave both alone. */
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
        hl_profile_dump();
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
