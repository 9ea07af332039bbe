/*
 * unwind_objects.c: which loaded object holds an address, its path and its span,
 * from the loader's list (dl_iterate_phdr), and whose definition of a
 * name the program's calls reach. boot.c asks whose malloc comes first,
 * count_mapped.c which calls come from an allocator's own code, and sample_profile.c
 * what to name a stack's objects and where the shim itself is.
 */
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "lock.h"
#include "shim.h"

struct lookup {
    uintptr_t addr;
    const void *object;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *data)
{
    struct lookup *l = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && l->addr - lo < ph->p_memsz) {
            l->object = info->dlpi_phdr;
            return 1;
        }
    }
    return 0;
}

/* The loaded object whose segments hold addr (its program headers stand for
 * it), or NULL. Not dladdr: that searches the object's whole symbol table
 * for the nearest symbol, about 85,000 instructions a call in libc, which
 * made boot's 28 calls 2.4 million instructions, most of the shim's
 * start-up. */
const void *hl_object_of(const void *addr)
{
    struct lookup l = {(uintptr_t)addr, NULL};
    if (addr != NULL)
        dl_iterate_phdr(find_object, &l);
    return l.object;
}

struct named {
    uintptr_t addr;
    char *buf;
    size_t n;
    int found;
};

static int find_name(struct dl_phdr_info *info, size_t size, void *data)
{
    struct named *l = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || l->addr - (info->dlpi_addr + ph->p_vaddr) >= ph->p_memsz)
            continue;
        hl_object_name(info->dlpi_name, l->buf, l->n);
        l->found = 1;
        return 1;
    }
    return 0;
}

/* A loaded object's path from its loader name into buf (n bytes, cut to
 * n - 1): the program itself, which the loader names "", from
 * /proc/self/exe. */
void hl_object_name(const char *name, char *buf, size_t n)
{
    if (name == NULL || name[0] == 0) {
        ssize_t k = readlink("/proc/self/exe", buf, n - 1);
        buf[k > 0 ? k : 0] = 0;
        return;
    }
    size_t k = strlen(name) < n - 1 ? strlen(name) : n - 1;
    memcpy(buf, name, k);
    buf[k] = 0;
}

/* The path of the loaded object holding addr (the program's own from
 * /proc/self/exe), cut to n - 1 bytes; 0 if found. */
int hl_object_path(const void *addr, char *buf, size_t n)
{
    struct named l = {(uintptr_t)addr, buf, n, 0};
    buf[0] = 0;
    if (addr != NULL && n > 1)
        dl_iterate_phdr(find_name, &l);
    return l.found ? 0 : -1;
}

struct span {
    uintptr_t addr, lo, hi;
};

static int span_of(struct dl_phdr_info *info, size_t size, void *data)
{
    struct span *s = data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    int hit = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
        lo = a < lo ? a : lo;
        hi = b > hi ? b : hi;
        hit |= s->addr - a < ph->p_memsz;
    }
    if (!hit)
        return 0;
    s->lo = lo;
    s->hi = hi;
    return 1;
}

/* The address range of all the loaded segments of the object holding
 * addr; 0 if there is one. */
int hl_object_span(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
    struct span s = {(uintptr_t)addr, 0, 0};
    if (addr == NULL || !dl_iterate_phdr(span_of, &s))
        return -1;
    *lo = s.lo;
    *hi = s.hi;
    return 0;
}

/* The function a call to `name` from the program reaches: the first
 * definition in the global scope, which is the link maps' order. Neither
 * dlsym(RTLD_DEFAULT) (libheap.so is linked -Bsymbolic by Go's c-shared
 * mode, so a lookup from it starts with its own) nor dlsym on the
 * program's handle alone: a program built without PIE that takes no
 * definition of malloc still has a symbol for it, its PLT entry, which
 * dlsym returns: its symbol is undefined (SHN_UNDEF). */
#ifdef HL_MUSL
static struct link_map *program_map(void *program)
{
    struct link_map *m = NULL;
    return dlinfo(program, RTLD_DI_LINKMAP, &m) == 0 ? m : NULL;
}
#endif

void *hl_first_definition(const char *name)
{
    void *program = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
    struct link_map *m = NULL;
    if (program == NULL || dlinfo(program, RTLD_DI_LINKMAP, &m) != 0)
        return NULL;
    for (; m != NULL; m = m->l_next) {
#ifdef HL_MUSL
        int main_program = m == program_map(program); /* musl names it (AT_EXECFN) */
#else
        int main_program = m->l_name == NULL || m->l_name[0] == 0;
#endif
        void *h = main_program ? program : dlopen(m->l_name, RTLD_LAZY | RTLD_NOLOAD);
        void *f = h != NULL ? dlsym(h, name) : NULL;
        if (h != NULL && h != program)
            dlclose(h);
        Dl_info info;
        const ElfW(Sym) *sym = NULL;
        if (f != NULL && (!main_program || (dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) && sym != NULL &&
                                            sym->st_shndx != SHN_UNDEF)))
            return f;
    }
    return NULL;
}

/* ---- which object holds an address, on the allocation path ----------------
 * _dl_find_object (glibc 2.35: lock-free, async-signal-safe) from the
 * running glibc, not the one we were built on: linked, it would keep every
 * program from loading under an older glibc. Looked up in boot, where
 * dlsym's failure (its dlerror state is calloc'd) is served from the
 * bootstrap pool.
 *
 * Without it (or with HEAPLINE_FIND_OBJECT=phdr), a table of the loaded
 * objects: each one's span and .eh_frame_hdr, found once through
 * dl_iterate_phdr and read without a lock (a sequence count: a reader that
 * races a refresh tries again, then misses). dl_iterate_phdr takes the
 * loader's dl_load_write_lock, which glibc's fork does not reset in the
 * child; so a refresh holds a flag of ours that the fork handlers take
 * across every fork (lifecycle.c): no fork happens while we are inside it.
 * It refreshes at boot, when dlclose moves the unwinder's epoch, and on an
 * address in no object when the loader's counts of loads and unloads
 * (dlpi_adds, dlpi_subs) say a dlopen came since: a JIT frame costs one
 * dl_iterate_phdr that stops at the first object. No malloc: the table is
 * static. */
static int (*dl_find_object)(void *, struct hl_dlfo *);

#define TABLE_MAX 512

struct known {
    uintptr_t lo, hi;
    void *eh_frame;
    uintptr_t bias, dynamic;
    const char *name; /* the loader's, which lives as long as the object */
};

static struct known table[TABLE_MAX], scratch[TABLE_MAX]; /* scratch: the refresh's, under table_owner */
static uint32_t table_n, table_seq, table_stale;
/* The thread refreshing the table, or a fork under way (0: neither). It
 * is an owner lock (lock.h), as count_mapped.c's is, so that a fork from a
 * signal handler that interrupted its own thread's refresh passes through:
 * waiting there would wait for itself, and the interrupted refresh leaves
 * dl_iterate_phdr, in both processes, once the handler returns. */
static uintptr_t table_owner;
static int fork_took; /* written only by the thread that holds table_owner */
static unsigned long long table_adds = ~0ull, table_subs; /* the loader's counts the table is of */
static uintptr_t page_mask;
static __thread struct link_map found_map; /* what dlfo_link_map points at; its address names the thread to table_owner */

struct counts {
    unsigned long long adds, subs;
};

static int loader_counts(struct dl_phdr_info *info, size_t size, void *data)
{
    struct counts *c = data;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        c->adds = info->dlpi_adds, c->subs = info->dlpi_subs;
    return 1; /* the same in every object's: one is enough */
}

static int add_known(struct dl_phdr_info *info, size_t size, void *data)
{
    uint32_t *n = data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    struct known k = {.bias = info->dlpi_addr, .name = info->dlpi_name};
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD) {
            lo = a < lo ? a : lo;
            hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            k.eh_frame = (void *)a;
        } else if (ph->p_type == PT_DYNAMIC) {
            k.dynamic = a;
        }
    }
    if (hi == 0 || *n == TABLE_MAX)
        return *n == TABLE_MAX;
    k.lo = lo & page_mask; /* as the loader maps it: l_map_start */
    k.hi = hi;
    scratch[(*n)++] = k;
    return 0;
}

static void refresh(void)
{
    if (!hl_owner_trylock(&table_owner, (uintptr_t)&found_map))
        return; /* another thread is at it, or a fork is under way */
    struct counts c = {0, 0};
    dl_iterate_phdr(loader_counts, &c);
    if (!__atomic_exchange_n(&table_stale, 0, __ATOMIC_RELAXED) && c.adds == table_adds && c.subs == table_subs) {
        hl_owner_unlock(&table_owner);
        return; /* nothing loaded or unloaded since */
    }
    uint32_t n = 0;
    dl_iterate_phdr(add_known, &n);
    __atomic_add_fetch(&table_seq, 1, __ATOMIC_RELAXED); /* odd: being written */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(table, scratch, n * sizeof *table);
    __atomic_store_n(&table_n, n, __ATOMIC_RELAXED);
    __atomic_add_fetch(&table_seq, 1, __ATOMIC_RELEASE);
    table_adds = c.adds, table_subs = c.subs;
    hl_owner_unlock(&table_owner);
}

static int table_find(uintptr_t a, struct hl_dlfo *out)
{
    for (int tries = 0; tries < 4; tries++) {
        uint32_t seq = __atomic_load_n(&table_seq, __ATOMIC_ACQUIRE), n = __atomic_load_n(&table_n, __ATOMIC_RELAXED);
        struct known k = {0};
        for (uint32_t i = 0; i < n && i < TABLE_MAX; i++)
            if (a - table[i].lo < table[i].hi - table[i].lo) {
                k = table[i];
                break;
            }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if ((seq & 1) || __atomic_load_n(&table_seq, __ATOMIC_RELAXED) != seq)
            continue;
        if (k.hi == 0)
            return -1;
        found_map = (struct link_map){.l_addr = k.bias, .l_name = (char *)k.name, .l_ld = (ElfW(Dyn) *)k.dynamic};
        *out = (struct hl_dlfo){.dlfo_map_start = (void *)k.lo, .dlfo_map_end = (void *)k.hi,
                                .dlfo_link_map = &found_map, .dlfo_eh_frame = k.eh_frame};
        return 0;
    }
    return -1;
}

void hl_find_object_resolve(void)
{
    page_mask = ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
    *(void **)&dl_find_object = hl_cfg->find_object != HL_FIND_PHDR ? dlsym(RTLD_DEFAULT, "_dl_find_object") : NULL;
    if (dl_find_object == NULL)
        refresh();
}

int hl_find_object(const void *addr, struct hl_dlfo *out)
{
    if (HL_LIKELY(dl_find_object != NULL))
        return dl_find_object((void *)addr, out);
    if (__atomic_load_n(&table_stale, __ATOMIC_RELAXED))
        refresh();
    if (table_find((uintptr_t)addr, out) == 0)
        return 0;
    refresh();
    return table_find((uintptr_t)addr, out);
}

/* dlclose: the table goes stale with the unwinder's rules (override.c). */
void hl_objects_forget(void)
{
    __atomic_store_n(&table_stale, 1, __ATOMIC_RELAXED);
    if (dl_find_object == NULL)
        refresh(); /* here, in the program's own call, rather than in a later malloc */
}

/* Every fork: no refresh is inside dl_iterate_phdr while it happens, and
 * none starts (the parent's and the child's done let them go on). */
void hl_objects_fork_prepare(void)
{
    fork_took = hl_owner_lock(&table_owner, (uintptr_t)&found_map); /* 0: a handler inside our own refresh passes through */
}

void hl_objects_fork_done(void)
{
    if (fork_took)
        hl_owner_unlock(&table_owner);
}
