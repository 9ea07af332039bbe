/* quietexit.c: programs whose stderr is not what the shim would like at
 * exit. The shim's summary must never change how they end.
 *
 *   quietexit wait          allocate, read a byte from stdin, exit 0
 *   quietexit fill N        write N bytes to stderr, exit 0
 *   quietexit reopen PATH   close fd 2, open PATH (it becomes fd 2), write
 *                           "data\n" to it, exit 0
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    free(malloc(10));
    if (argc == 2 && strcmp(argv[1], "wait") == 0) {
        char c;
        return read(0, &c, 1) == 1 ? 0 : 2;
    }
    if (argc == 3 && strcmp(argv[1], "fill") == 0) {
        static char buf[1 << 20];
        size_t n = (size_t)atol(argv[2]);
        memset(buf, 'x', sizeof buf);
        while (n > 0) {
            ssize_t w = write(2, buf, n < sizeof buf ? n : sizeof buf);
            if (w <= 0)
                return 3;
            n -= (size_t)w;
        }
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "reopen") == 0) {
        close(2);
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd != 2)
            return 4;
        return write(fd, "data\n", 5) == 5 ? 0 : 5;
    }
    return 1;
}
