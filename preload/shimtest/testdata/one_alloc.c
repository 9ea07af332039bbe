/* One malloc and one free: the exit summary says "1 alloc, 1 free". */
#include <stdlib.h>

int main(void)
{
    void *volatile p = malloc(16);
    free(p);
    return 0;
}
