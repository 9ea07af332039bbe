/*
 * lock.h: the shim's two locks, one implementation each.
 *
 * A spin lock (a word, 0 free, 1 held) for short sections no signal
 * handler of the same thread re-enters: sample_stacks.c's object table, count_thread.c's
 * fold. An owner lock (a word holding its holder's thread-local address,
 * 0 free) where a signal handler inside the holder's own section must pass
 * through rather than wait for itself: count_mapped.c's table, unwind_objects.c's
 * refresh. Both wait with sched_yield: the holder may be preempted, and the
 * sections are never on the allocation path. Acquire on taking, release
 * on letting go.
 */
#ifndef HEAPLINE_LOCK_H
#define HEAPLINE_LOCK_H

#include <sched.h>
#include <stdint.h>

static inline void hl_spin_lock(uint32_t *l)
{
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}

static inline void hl_spin_unlock(uint32_t *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

/* Takes the lock for `me` (an address only this thread has): 1 when taken,
 * 0 when `me` holds it already (a signal handler inside the holder's own
 * section), which then must not let it go. */
static inline int hl_owner_lock(uintptr_t *owner, uintptr_t me)
{
    uintptr_t free_owner = 0;
    if (__atomic_load_n(owner, __ATOMIC_RELAXED) == me)
        return 0;
    while (!__atomic_compare_exchange_n(owner, &free_owner, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        free_owner = 0;
        sched_yield();
    }
    return 1;
}

/* Takes the lock for `me` if it is free: 1 when taken, 0 when anyone
 * (`me` included) holds it. */
static inline int hl_owner_trylock(uintptr_t *owner, uintptr_t me)
{
    uintptr_t free_owner = 0;
    return __atomic_compare_exchange_n(owner, &free_owner, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static inline void hl_owner_unlock(uintptr_t *owner) { __atomic_store_n(owner, 0, __ATOMIC_RELEASE); }

#endif
