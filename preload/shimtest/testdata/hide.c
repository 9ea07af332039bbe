/*
 * hide.c: a fault-injecting library, preloaded after libheap.so (whose
 * calls to dlsym it then takes): dlsym finds nothing for the name in
 * $HIDE_SYMBOL, and gnu_get_libc_version says $FAKE_GLIBC when set. A
 * system the shim cannot serve, on a machine that has none.
 */
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <stdlib.h>
#include <string.h>

static void *(*real_dlsym)(void *, const char *);
static const char *(*real_version)(void);

void *dlsym(void *handle, const char *name)
{
    if (real_dlsym == NULL) {
        *(void **)&real_dlsym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (real_dlsym == NULL)
            *(void **)&real_dlsym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    }
    const char *hide = getenv("HIDE_SYMBOL");
    if (hide != NULL && strcmp(hide, name) == 0)
        return NULL;
    /* RTLD_NEXT from here is what it was from libheap.so, which comes
     * just before us and is not asked for its own names */
    return real_dlsym(handle, name);
}

const char *gnu_get_libc_version(void)
{
    const char *fake = getenv("FAKE_GLIBC");
    if (fake != NULL)
        return fake;
    if (real_version == NULL)
        *(void **)&real_version = real_dlsym != NULL ? real_dlsym(RTLD_NEXT, "gnu_get_libc_version")
                                                     : dlvsym(RTLD_NEXT, "gnu_get_libc_version", "GLIBC_2.1");
    return real_version();
}
