/* stack_arm64.c: a known arm64 stack for ctl/internal/unwind's test. main calls
 * a, a calls b, b calls c; c takes its pc, sp, x29 and x30, then writes
 * them, the stack from sp up (page by page, to where it ends, at most
 * 16 KiB as bpf/heap.c copies) and /proc/self/maps into the directory
 * argv[1]. */
#include <fcntl.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *dir;

static int open_in(const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	return fd;
}

__attribute__((noinline)) int c(int n)
{
	uint64_t pc, sp, fp, lr;
	__asm__ volatile("adr %0, .\n\tmov %1, sp\n\tmov %2, x29\n\tmov %3, x30"
			 : "=r"(pc), "=r"(sp), "=r"(fp), "=r"(lr));
	int fd = open_in("stack");
	/* A write that crosses the stack's end fails whole (EFAULT): up to
	 * the page boundary first, then page by page. */
	uint64_t len = 4096 - (sp & 4095);
	if (write(fd, (void *)sp, len) != (ssize_t)len)
		exit(1);
	while (len + 4096 <= 16384 && write(fd, (void *)(sp + len), 4096) == 4096)
		len += 4096;
	close(fd);
	FILE *f = fdopen(open_in("regs"), "w");
	fprintf(f, "%llx %llx %llx %llx\n", (unsigned long long)pc, (unsigned long long)sp,
		(unsigned long long)fp, (unsigned long long)lr);
	fclose(f);
	int in = open("/proc/self/maps", O_RDONLY), out = open_in("maps");
	char buf[4096];
	ssize_t r;
	while ((r = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, r) != r)
			exit(1);
	close(in);
	close(out);
	return n + 1;
}

/* Each adds after its call, so that no call is a tail call. */
__attribute__((noinline)) int b(int n) { return c(n * 3) + 2; }
__attribute__((noinline)) int a(int n) { return b(n * 5) + 4; }

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	dir = argv[1];
	return a(argc) == 3 * 5 * 2 + 7 ? 0 : 1;
}
