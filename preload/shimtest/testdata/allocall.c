/* allocall.c: every function of the malloc family, each result checked,
 * then exit 3: what it prints and its status must not change under the
 * shim, whether it counts or only passes calls through. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    char *a = malloc(100), *b = calloc(10, 10);
    void *c = NULL, *d = aligned_alloc(64, 128), *e = memalign(256, 10);
    int bad = a == NULL || b == NULL || b[99] != 0 || posix_memalign(&c, 4096, 10) != 0 || d == NULL || e == NULL;
    bad |= ((uintptr_t)c & 4095) != 0 || ((uintptr_t)d & 63) != 0 || ((uintptr_t)e & 255) != 0;
    bad |= malloc_usable_size(a) < 100;
    strcpy(a, "allocall");
    a = realloc(a, 100000);
    printf("%s %d\n", a, bad);
    free(a), free(b), free(c), free(d), free(e);
    return 3;
}
