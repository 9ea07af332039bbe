/* dtorlib.c: a shared library that allocates in its constructor and frees
 * in its destructor, as many do. Its destructor runs after the program's
 * exit handlers; the shim's summary must still count the free. With
 * DTOR_EXIT set, the destructor ends the process with _exit(7), after the
 * shim's summary would once have been written. */
#include <stdlib.h>
#include <unistd.h>

static void *block;

__attribute__((constructor)) static void made(void) { block = malloc(100000); }

__attribute__((destructor)) static void unmade(void)
{
    free(block);
    if (getenv("DTOR_EXIT") != NULL) {
        free(malloc(10));
        _exit(7);
    }
}
