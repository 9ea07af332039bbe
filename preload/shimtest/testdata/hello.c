/* hello.c: a program that allocates and prints: its output must not change
 * under the shim, whatever the shim finds in /dev/shm. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    char *s = malloc(64);
    strcpy(s, "hello");
    int *v = calloc(10, sizeof *v);
    v[3] = 42;
    printf("%s %d\n", s, v[3]);
    free(v);
    free(s);
    return 0;
}
