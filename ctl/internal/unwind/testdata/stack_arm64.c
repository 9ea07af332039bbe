/* stack_arm64.c: a known arm64 stack for ctl/internal/unwind's test. main calls
 * a, a calls b, b calls c; c takes its pc, sp, x29 and x30, then writes
 * them, the stack from sp up (page by page, to where it ends, at most
 * 16 KiB as bpf/heap.c copies) and /proc/self/maps into the directory
 * argv[1]. c also calls leaf, a function without a frame, whose pc, sp,
 * x29 and x30 it writes too (leafregs): a leaf's return address is in x30
 * alone, and its sp is c's, so the one copy of the stack serves both. */
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

/* leaf records its registers in leaf_regs and returns: no frame, no
 * save of x30, the default CFI rules (CFA = sp, x30 unchanged). Its pc is
 * taken after its first instruction: the walk looks up pc - 1. */
uint64_t leaf_regs[4];
void leaf(void);
__asm__(".text\n"
	".globl leaf\n"
	".type leaf, %function\n"
	"leaf:\n"
	".cfi_startproc\n"
	"	mov x10, sp\n"
	"	adr x9, .\n"
	"	adrp x11, leaf_regs\n"
	"	add x11, x11, :lo12:leaf_regs\n"
	"	stp x9, x10, [x11]\n"
	"	stp x29, x30, [x11, #16]\n"
	"	ret\n"
	".cfi_endproc\n"
	".size leaf, .-leaf\n");

__attribute__((noinline)) int c(int n)
{
	uint64_t pc, sp, fp, lr;
	__asm__ volatile("adr %0, .\n\tmov %1, sp\n\tmov %2, x29\n\tmov %3, x30"
			 : "=r"(pc), "=r"(sp), "=r"(fp), "=r"(lr));
	leaf();
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
	f = fdopen(open_in("leafregs"), "w");
	fprintf(f, "%llx %llx %llx %llx\n", (unsigned long long)leaf_regs[0], (unsigned long long)leaf_regs[1],
		(unsigned long long)leaf_regs[2], (unsigned long long)leaf_regs[3]);
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
