/*
 * count_thread.h: the thread's state, one initial-exec TLS variable (hl_self),
 * and the re-entry guard.
 *
 * Each subsystem declares its part in its own header, and hl_thread is
 * their sum: count_thread.c's counting first, then the sampler's and the
 * arena's (sample.h) and Python's (py.h). One variable, not one per
 * part, keeps the fast path at one TLS address (one GOT load); `slot`
 * first keeps aarch64's at one ldr [tp, x], with no add of a field's
 * offset. Initial-exec is the only model that never calls malloc (a
 * dynamic TLS block is allocated lazily by __tls_get_addr).
 */
#ifndef HEAPLINE_THREAD_H
#define HEAPLINE_THREAD_H

#include "shim.h"
#include "sample.h"
#include "py.h"

/* The counting (count_thread.c, count_glibc.*). `slot` is what the fast path
 * adds to. It is NULL until the thread's first call registers it on the
 * slow path (a shared all-ones dummy would do without that test, but two
 * threads' adds to one word, without a lock, lose counts). A thread
 * without a fast slot afterwards (exited, slot-less, or every thread when
 * the peak must be exact) adds to its own `dummy`, all ones, so that
 * every add carries and is drained (count_thread.c, carry). `own` is the
 * thread's real slot. */
enum { HL_T_NEW = 0, HL_T_STARTING, HL_T_SLOTTED, HL_T_OVERFLOW, HL_T_GONE };
struct hl_thread {
    struct hl_slot *slot;   /* the fast path's: own, dummy, or NULL (see above) */
#if defined(__aarch64__)
    uint64_t *free_at;      /* &slot->free_word, NULL with slot (hl_set_slot): ldxr takes no offset */
#endif
    struct hl_slot dummy;   /* this thread's all-ones slot */
    struct hl_slot *own;    /* NULL without a slot */
    uint64_t alloc_mark;    /* slow path: publish when own->alloc_bytes reaches it */
    uint64_t free_mark;
    uint32_t state;         /* HL_T_* */
    uint32_t guard;         /* HL_IN_*: the re-entry guard (below) */
    struct hl_sampler_tls sampler; /* sample_profile.c */
    struct hl_arena_tls arena;     /* sample_arena.c */
    struct hl_python_tls py;       /* py_frames.c */
};
extern __thread struct hl_thread hl_self __attribute__((tls_model("initial-exec"))) HL_HIDDEN;
_Static_assert(offsetof(struct hl_thread, slot) == 0, "slot is hl_self's first word (count_glibc.h)");
/* Every thread of the program carries this, in the static TLS block it
 * is created with: a part that grows past the six lines says so here. */
_Static_assert(sizeof(struct hl_thread) <= 6 * HL_LINE, "the thread's state: six cache lines, the dummy slot one");

/* Every change of the fast slot: aarch64's fast free adds to free_at.
 * Either store may come first: a handler's free between them adds to the
 * old slot's word, or finds none and counts through hl_self.slot. */
static inline void hl_set_slot(struct hl_slot *s)
{
    hl_self.slot = s;
#if defined(__aarch64__)
    hl_self.free_at = s != NULL ? &s->free_word : NULL;
#endif
}

/* The re-entry guard: one word of the thread's, a bit for each case the
 * shim can be re-entered in. A call that finds its bit set came back while
 * the thread was already in that case, from the case's own work or from a
 * signal handler that interrupted it. heaptrack's RecursionGuard is one
 * flag, and every nested call passes through; here what the nested call
 * does differs by case, so each has its bit:
 *   HL_IN_BOOT     resolving the next allocator (boot.c): the thread's own
 *                  calls (dlsym's calloc) and its handlers' get the
 *                  bootstrap pool, since there is no allocator to pass to;
 *   HL_PUBLISHING  in publish() (count_thread.c): a handler's publication returns
 *                  and the next one carries its change, since two at once
 *                  would both add it;
 *   HL_IN_SAMPLE   in the sampler (sample_profile.c): a handler's allocation is
 *                  counted, not sampled;
 *   HL_IN_ARENA    in the thread's own arena lists (sample_arena.c): a handler's
 *                  sample or release uses the shared lists.
 * Only the thread and its handlers write the word, with plain loads and
 * stores: a handler that comes between an enter's load and store leaves
 * the word as it found it (it leaves every bit it entered), so the store is
 * still right. The fences keep the compiler from moving the guarded work
 * out from between enter and leave. */
enum { HL_IN_BOOT = 1u << 0, HL_PUBLISHING = 1u << 1, HL_IN_SAMPLE = 1u << 2, HL_IN_ARENA = 1u << 3 };
static inline int hl_guard_held(uint32_t bit) { return (hl_self.guard & bit) != 0; }
static inline void hl_guard_enter(uint32_t bit)
{
    hl_self.guard |= bit;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
static inline void hl_guard_leave(uint32_t bit)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    hl_self.guard &= ~bit;
}

#endif
