/* goarchive.c: calls the Go library of testdata/goarchive, linked in as a
 * shared library; prints "answer 42". */
#include <stdio.h>

extern int Answer(void);

int main(void)
{
    printf("answer %d\n", Answer());
    return 0;
}
