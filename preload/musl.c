/*
 * musl.c: the musl build's stand-ins for glibc's extensions (musl.h).
 * Built only with HL_MUSL.
 */
#ifdef HL_MUSL
#include <errno.h>
#include <link.h>
#include <string.h>
#include <unistd.h>
#include <sys/auxv.h>
#include <sys/uio.h>
#include "shim.h"

void *hl_musl_stack_end;

__attribute__((constructor(101))) static void stack_end(void)
{
    hl_musl_stack_end = (void *)getauxval(AT_RANDOM);
}

struct symfind {
    uintptr_t addr; /* what we look for */
    const ElfW(Sym) *sym;
    Dl_info *info;
};

/* The number of dynamic symbols, from DT_HASH or DT_GNU_HASH (musl's
 * count_syms does the same). */
static size_t count_syms(const uint32_t *hash, const uint32_t *gnu)
{
    if (hash != NULL)
        return hash[1];
    if (gnu == NULL)
        return 0;
    const uint32_t *buckets = gnu + 4 + gnu[2] * (sizeof(size_t) / 4);
    size_t n = 0;
    for (uint32_t i = 0; i < gnu[0]; i++)
        if (buckets[i] > n)
            n = buckets[i];
    if (n == 0)
        return 0;
    const uint32_t *chain = buckets + gnu[0] + (n - gnu[1]);
    do
        n++;
    while (!(*chain++ & 1));
    return n;
}

/* In the object that holds f->addr: a symbol whose value is f->addr, a
 * defined one first. musl leaves the dynamic section unrelocated. */
static int find_sym(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct symfind *f = arg;
    const ElfW(Dyn) *dyn = NULL;
    int holds = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_DYNAMIC)
            dyn = (const void *)lo;
        else if (ph->p_type == PT_LOAD && f->addr >= lo && f->addr - lo < ph->p_memsz)
            holds = 1;
    }
    if (!holds)
        return 0;
    if (dyn == NULL)
        return 1;
    const ElfW(Sym) *syms = NULL;
    const uint32_t *hash = NULL, *gnu = NULL;
    const char *strings = NULL;
    f->info->dli_fname = info->dlpi_name;
    f->info->dli_fbase = (void *)info->dlpi_addr;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        const void *at = (const void *)(info->dlpi_addr + dyn->d_un.d_ptr);
        if (dyn->d_tag == DT_SYMTAB)
            syms = at;
        else if (dyn->d_tag == DT_STRTAB)
            strings = at;
        else if (dyn->d_tag == DT_HASH)
            hash = at;
        else if (dyn->d_tag == DT_GNU_HASH)
            gnu = at;
    }
    size_t n = syms != NULL ? count_syms(hash, gnu) : 0;
    for (size_t i = 0; i < n; i++) {
        if (syms[i].st_value == 0 || info->dlpi_addr + syms[i].st_value != f->addr)
            continue;
        if (f->sym == NULL || f->sym->st_shndx == SHN_UNDEF)
            f->sym = &syms[i];
    }
    if (f->sym != NULL && strings != NULL) {
        f->info->dli_sname = strings + f->sym->st_name;
        f->info->dli_saddr = (void *)f->addr;
    }
    return 1;
}

/* Not through musl's dladdr, which scans every symbol of the object by
 * address (some 23,000 instructions for libc's): only the symbols whose
 * value is addr fill info, and none leaves it with the object alone. */
int hl_musl_dladdr1(const void *addr, Dl_info *info, void **extra, int flags)
{
    (void)flags;
    *info = (Dl_info){0};
    struct symfind f = {(uintptr_t)addr, NULL, info};
    int found = dl_iterate_phdr(find_sym, &f);
    *extra = (void *)f.sym;
    return found;
}

static void *(*musl_malloc)(size_t);
static void *(*musl_aligned_alloc)(size_t, size_t);

static void *calloc_on_malloc(size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = musl_malloc(bytes);
    /* musl's own calloc clears the whole block too once malloc is replaced */
    return p != NULL ? memset(p, 0, bytes) : NULL;
}

static void *memalign_on_aligned(size_t align, size_t n) { return musl_aligned_alloc(align, n); }

static int posix_memalign_on_aligned(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *))
        return EINVAL;
    void *p = musl_aligned_alloc(align, n);
    if (p == NULL)
        return errno;
    *out = p;
    return 0;
}

static void *valloc_on_aligned(size_t n) { return musl_aligned_alloc((size_t)sysconf(_SC_PAGESIZE), n); }

/* By the loaded objects' spans (unwind_objects.c): musl's dladdr scans every
 * symbol of the object, some 23,000 instructions for libc. */
static int same_object(const void *a, const void *b)
{
    const void *o = hl_object_of(a);
    return o != NULL && o == hl_object_of(b);
}

/* ---- mallocng's usable size, read inline ----
 * musl's malloc_usable_size checks the block's metadata against its
 * group, area and secret before it answers: some 94 instructions, twice
 * a malloc+free pair. mallocng (musl 1.2.1 and later) keeps what it needs
 * in front of the block and in the group's meta: the slot's index and
 * the reserved bytes at p[-3], the group's offset at p[-2] (p[-8] for a
 * large one), the stride by the meta's size class, or its mapping's
 * length for a lone mapped slot. The same reads without the checks, once
 * they agree with musl's own answer on blocks of every kind at boot
 * (ng_agrees), where each read goes through process_vm_readv and so
 * cannot fault on an allocator laid out otherwise. */
struct ng_group {
    const struct ng_meta *meta;
    unsigned char active_idx : 5;
    char pad[16 - sizeof(void *) - 1];
    unsigned char storage[];
};

struct ng_meta {
    const struct ng_meta *prev, *next;
    const struct ng_group *mem;
    int avail_mask, freed_mask;
    uintptr_t last_idx : 5;
    uintptr_t freeable : 1;
    uintptr_t sizeclass : 6;
    uintptr_t maplen : 8 * sizeof(uintptr_t) - 12;
};

static const uint16_t ng_classes[48] = {
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 18, 20, 25, 31,
    36, 42, 50, 63, 72, 84, 102, 127, 146, 170, 204, 255, 292, 340, 409, 511,
    584, 682, 818, 1023, 1169, 1364, 1637, 2047, 2340, 2730, 3276, 4095, 4680, 5460, 6552, 8191,
};

static int peek(const void *at, void *out, size_t n)
{
    struct iovec local = {out, n}, remote = {(void *)at, n};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* The usable size by mallocng's layout; with safe, every read is peeked
 * and -1 means it failed or made no sense. */
static inline __attribute__((always_inline)) size_t ng_size(const unsigned char *p, int safe)
{
#define READ(dst, at)                                            \
    do {                                                         \
        if (safe) {                                              \
            if (peek((at), &(dst), sizeof(dst)) != 0)            \
                return (size_t)-1;                               \
        } else {                                                 \
            memcpy(&(dst), (at), sizeof(dst));                   \
        }                                                        \
    } while (0)
    unsigned char hdr[4];
    uint16_t off16;
    uint32_t off;
    READ(hdr, p - 4);
    READ(off16, p - 2);
    off = off16;
    if (hdr[0])
        READ(off, p - 8);
    const struct ng_group *base = (const void *)(p - 16 * (uintptr_t)off - 16);
    const struct ng_meta *g;
    READ(g, &base->meta);
    struct ng_meta m;
    READ(m, g);
    size_t stride = (m.last_idx == 0 && m.maplen != 0) ? m.maplen * 4096ul - 16 : 16 * (size_t)ng_classes[m.sizeclass];
    const unsigned char *end = m.mem->storage + stride * (hdr[1] & 31) + stride - 4;
    size_t reserved = hdr[1] >> 5;
    if (reserved >= 5) {
        uint32_t r;
        READ(r, end - 4);
        reserved = r;
    }
    if (safe && (m.mem != base || end < p + reserved))
        return (size_t)-1;
    return (size_t)(end - reserved - p);
#undef READ
}

static size_t ng_usable(void *p) { return p != NULL ? ng_size(p, 0) : 0; }

/* musl's answer and ng_size's agree on blocks of every kind: small and
 * large classes, a lone mapped slot, aligned ones. */
static int ng_agrees(const struct hl_fns *next)
{
    static const size_t sizes[] = {0, 1, 12, 13, 100, 1000, 4000, 20000, 70000, 131052, 131053, (size_t)1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *b = musl_malloc(sizes[i]);
        int ok = b != NULL && ng_size(b, 1) == next->usable(b);
        next->free(b);
        void *a = musl_aligned_alloc(4096, sizes[i] + 1);
        ok = ok && a != NULL && ng_size(a, 1) == next->usable(a);
        next->free(a);
        if (!ok)
            return 0;
    }
    return 1;
}

void hl_musl_next(struct hl_fns *next, void *(*real_malloc)(size_t))
{
    /* only musl's own: another allocator after us keeps its functions */
    if (real_malloc == NULL || next->aligned_alloc == NULL || !same_object((void *)real_malloc, (void *)dladdr) ||
        !same_object((void *)next->aligned_alloc, (void *)dladdr))
        return;
    musl_malloc = real_malloc;
    musl_aligned_alloc = next->aligned_alloc;
    next->calloc = calloc_on_malloc;
    next->memalign = memalign_on_aligned;
    next->posix_memalign = posix_memalign_on_aligned;
    next->valloc = valloc_on_aligned;
    if (next->usable != NULL && same_object((void *)next->usable, (void *)dladdr) && ng_agrees(next))
        next->usable = ng_usable;
}
#endif
