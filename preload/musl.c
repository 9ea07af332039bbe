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
#include "shim.h"

void *hl_musl_stack_end;

__attribute__((constructor(101))) static void stack_end(void)
{
    hl_musl_stack_end = (void *)getauxval(AT_RANDOM);
}

struct symfind {
    uintptr_t addr; /* what we look for */
    const ElfW(Sym) *sym;
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
    for (; dyn->d_tag != DT_NULL; dyn++) {
        const void *at = (const void *)(info->dlpi_addr + dyn->d_un.d_ptr);
        if (dyn->d_tag == DT_SYMTAB)
            syms = at;
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
    return 1;
}

int hl_musl_dladdr1(const void *addr, Dl_info *info, void **extra, int flags)
{
    (void)flags;
    *extra = NULL;
    if (!dladdr(addr, info))
        return 0;
    struct symfind f = {(uintptr_t)addr, NULL};
    dl_iterate_phdr(find_sym, &f);
    *extra = (void *)f.sym;
    return 1;
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

static int same_object(const void *a, const void *b)
{
    Dl_info ia, ib;
    return dladdr(a, &ia) && dladdr(b, &ib) && ia.dli_fbase == ib.dli_fbase;
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
}
#endif
