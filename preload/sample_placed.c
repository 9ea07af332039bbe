/*
 * sample_placed.c: the table of blocks sampled in place (sample_profile.c takes the
 * samples): large blocks of the glibc mode and every sampled block of the
 * generic mode, whose frees find them here by address. Memory of our own
 * (raw mmap, made by hl_placed_boot), lock-free: nothing here allocates
 * or locks.
 */
#include "shim.h"
#include "sample.h"
#include "usdt.h"

#define RELAXED __ATOMIC_RELAXED

/* Open addressing on the block's address; a released entry becomes a
 * tombstone. Probes are bounded: a full neighbourhood loses the sample. */

#define PLACED_SIZE  ((size_t)1 << 16)
#define PLACED_PROBE 64
#define TOMB         ((uint64_t)1)

struct placed {
    uint64_t addr;
    struct record rec;
};

static struct placed *placed;
uint64_t hl_placed_live; /* sampled in place and not released: frees look only then */

static size_t slot_of(uint64_t addr) { return (size_t)((addr >> 4) * 0x9e3779b97f4a7c15ull >> 48) & (PLACED_SIZE - 1); }

int hl_place(const void *p, const struct record *rec)
{
    uint64_t a = (uintptr_t)p;
    for (size_t i = 0, at = slot_of(a); placed != NULL && i < PLACED_PROBE; i++, at = (at + 1) & (PLACED_SIZE - 1)) {
        struct placed *e = &placed[at];
        uint64_t k = __atomic_load_n(&e->addr, RELAXED);
        if ((k == 0 || k == TOMB) && __atomic_compare_exchange_n(&e->addr, &k, a, 0, RELAXED, RELAXED)) {
            e->rec = *rec; /* before the block is anyone else's to free */
            __atomic_add_fetch(&hl_placed_live, 1, RELAXED);
            return 1;
        }
    }
    return 0;
}

/* Take p's record out of the table, if it was sampled in place. */
static int unplace(const void *p, struct record *out)
{
    uint64_t a = (uintptr_t)p;
    for (size_t i = 0, at = slot_of(a); placed != NULL && i < PLACED_PROBE; i++, at = (at + 1) & (PLACED_SIZE - 1)) {
        struct placed *e = &placed[at];
        uint64_t k = __atomic_load_n(&e->addr, RELAXED);
        if (k == 0)
            return 0;
        if (k == a) {
            *out = e->rec;
            __atomic_store_n(&e->addr, TOMB, RELAXED);
            __atomic_sub_fetch(&hl_placed_live, 1, RELAXED);
            return 1;
        }
    }
    return 0;
}

void hl_unplace(const void *p)
{
    struct record r;
    if (unplace(p, &r)) {
        hl_fire_free(p);
        hl_account(&r, 1);
    }
}

/* realloc: the record leaves the table before the block goes back to the
 * allocator (another thread may be given its address and sample it), and
 * comes back if the realloc fails. The free probe fires here for the same
 * reason: after the realloc, another thread's alloc at the address could
 * come first. A failed realloc (the block stays) is then a free a tracer
 * saw that did not happen. */
int hl_unplace_take(const void *p, struct hl_taken *t)
{
    if (!unplace(p, (struct record *)t))
        return 0;
    hl_fire_free(p);
    return 1;
}

void hl_unplace_done(const void *p, const struct hl_taken *t, int released)
{
    const struct record *r = (const struct record *)t;
    if (released)
        hl_account(r, 1);
    else if (!hl_place(p, r))
        hl_account(r, 1); /* no room again: its release is at least counted */
}

/* At boot (sample_profile.c), once sampling is on. */
void hl_placed_boot(void) { placed = hl_raw_map(PLACED_SIZE * sizeof *placed); }
