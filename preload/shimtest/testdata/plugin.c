/* plugin.c: a library dlopen'd after the shim has booted (dlopens.c),
 * built twice with FN named plugin_a and plugin_b: one 8 MiB block from
 * each, sampled, its stack through the plugin's frame. */
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void *FN(size_t n)
{
    char *p = malloc(n);
    if (p != NULL)
        memset(p, 1, 64);
    __asm__ volatile("" ::: "memory"); /* no tail call: the frame stays */
    return p;
}
