/* dlopens.c LIB FN LIB FN ...: for each pair, dlopen LIB, dlclose the
 * one before it, then call FN (plugin.c) for one 8 MiB block and free it;
 * the last is dlclose'd at the end. Each object is loaded while the one
 * before is still there, so no two share an address. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    void *before = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
        void *(*fn)(size_t) = h != NULL ? (void *(*)(size_t))dlsym(h, argv[i + 1]) : NULL;
        if (fn == NULL) {
            fprintf(stderr, "dlopens: %s\n", dlerror());
            return 1;
        }
        if (before != NULL)
            dlclose(before);
        free(fn((size_t)8 << 20));
        before = h;
    }
    if (before != NULL)
        dlclose(before);
    printf("ok\n");
    return 0;
}
