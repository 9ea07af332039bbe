// freeearly.c: a free before the shim has booted (known-answer steps,
// steps.h). The program's preinit_array runs before every library's
// constructor; there it takes a block from glibc's own malloc, reached
// without the shim's (its address read from libc's dynamic symbols: dlsym
// may allocate), and hands it to the free the program calls, the shim's,
// which glibc's free behind it takes. No region yet shows that nothing
// had booted the shim. On aarch64 the fast free once read its
// thread-pointer offset unset there and added through the DTV pointer.
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include "steps.h"

static void *(*libc_malloc)(size_t);
static const char *early_fail;

/* The number of symbols of a DT_GNU_HASH table: past the last chain's end. */
static uint32_t gnu_hash_symbols(const uint32_t *h)
{
    uint32_t nbuckets = h[0], symoffset = h[1], bloom = h[2];
    const uint32_t *buckets = (const uint32_t *)((const uint64_t *)(h + 4) + bloom), *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t b = 0; b < nbuckets; b++)
        if (buckets[b] > last)
            last = buckets[b];
    if (last < symoffset)
        return symoffset;
    while (!(chain[last - symoffset] & 1))
        last++;
    return last + 1;
}

static int find_malloc(struct dl_phdr_info *info, size_t size, void *unused)
{
    if (info->dlpi_name == NULL || strstr(info->dlpi_name, "/libc.so.6") == NULL)
        return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    const ElfW(Sym) *syms = NULL;
    const char *strs = NULL;
    const uint32_t *gnu = NULL;
    for (; dyn != NULL && dyn->d_tag != DT_NULL; dyn++) {
        uintptr_t v = dyn->d_un.d_ptr;
        if (v < info->dlpi_addr) /* not relocated in place */
            v += info->dlpi_addr;
        if (dyn->d_tag == DT_SYMTAB) syms = (const ElfW(Sym) *)v;
        if (dyn->d_tag == DT_STRTAB) strs = (const char *)v;
        if (dyn->d_tag == DT_GNU_HASH) gnu = (const uint32_t *)v;
    }
    if (syms == NULL || strs == NULL || gnu == NULL)
        return 1;
    for (uint32_t i = 0, n = gnu_hash_symbols(gnu); i < n; i++)
        if (syms[i].st_shndx != SHN_UNDEF && ELF64_ST_TYPE(syms[i].st_info) == STT_FUNC && strcmp(strs + syms[i].st_name, "malloc") == 0)
            libc_malloc = (void *(*)(size_t))(info->dlpi_addr + syms[i].st_value);
    return 1;
}

static void early(int argc, char **argv, char **envp)
{
    char region[64] = "/dev/shm/heapline.", pid[24];
    num(pid, getpid());
    strcat(region, pid);
    if (access(region, F_OK) == 0) {
        early_fail = "the shim had booted before the program's preinit_array";
        return;
    }
    dl_iterate_phdr(find_malloc, NULL);
    if (libc_malloc == NULL) {
        early_fail = "no malloc in libc.so.6's dynamic symbols";
        return;
    }
    char *volatile p = libc_malloc(24);
    free(p);
}

__attribute__((section(".preinit_array"), used)) static void (*const preinit)(int, char **, char **) = early;

int main(void)
{
    if (early_fail != NULL)
        fail(early_fail);
    step("start", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN);
    char *volatile p = malloc(100);
    step("malloc", 1, 0, U(p), 0, UNKNOWN);
    long long u = U(p);
    free(p);
    step("free", 0, 1, 0, u, UNKNOWN);
    out("DONE\n");
    return 0;
}
