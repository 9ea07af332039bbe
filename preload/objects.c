/*
 * objects.c: which loaded object holds an address, its path and its span,
 * from the loader's list (dl_iterate_phdr), and whose definition of a
 * name the program's calls reach. boot.c asks whose malloc comes first,
 * mapped.c which calls come from an allocator's own code, and profile.c
 * what to name a stack's objects and where the shim itself is.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
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
void *hl_first_definition(const char *name)
{
    void *program = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
    struct link_map *m = NULL;
    if (program == NULL || dlinfo(program, RTLD_DI_LINKMAP, &m) != 0)
        return NULL;
    for (; m != NULL; m = m->l_next) {
        int main_program = m->l_name == NULL || m->l_name[0] == 0;
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

/* _dl_find_object (glibc 2.35: lock-free, async-signal-safe) from the
 * running glibc, not from the one we were built on: linked, it would make
 * every program fail to load under an older glibc. Looked up in boot,
 * where dlsym's failure (its dlerror state is calloc'd) is served from
 * the bootstrap pool. */
static int (*dl_find_object)(void *, struct hl_dlfo *);

void hl_find_object_resolve(void)
{
    *(void **)&dl_find_object = dlsym(RTLD_DEFAULT, "_dl_find_object");
}

int hl_find_object(const void *addr, struct hl_dlfo *out)
{
    return dl_find_object != NULL ? dl_find_object((void *)addr, out) : -1;
}
