// doublefree.c: frees one block twice, as a buggy program does. glibc
// aborts with a message; so must the shim when the block was sampled.
#include <stdlib.h>

int main(void)
{
    void *volatile p = malloc(100);
    free(p);
    free(p);
    return 0;
}
