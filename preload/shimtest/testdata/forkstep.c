// forkstep.c: a signal handler that forks between the fast malloc's load
// of the thread's slot and its add to the slot (x86-64). The program
// single-steps its own malloc call (the trap flag); the SIGTRAP handler
// forks at the add itself (REX.W add to memory, the one in malloc), and
// the child returns from the handler into that add, then allocates and
// frees once more. Prints "child ok" from the parent when the child
// exited 0, or how it ended.
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#define TF 0x100

static uintptr_t lo, hi; /* the exported malloc's first bytes */
static volatile int forked, child, status;
static long steps;

static void on_trap(int sig, siginfo_t *si, void *uc_)
{
    ucontext_t *uc = uc_;
    const unsigned char *ip = (const unsigned char *)uc->uc_mcontext.gregs[REG_RIP];
    if (++steps > 1000000 || forked) {
        uc->uc_mcontext.gregs[REG_EFL] &= ~TF;
        return;
    }
    /* add r64, r/m64 to memory: 48 01 /r with mod 00 or 01 */
    if ((uintptr_t)ip < lo || (uintptr_t)ip >= hi || ip[0] != 0x48 || ip[1] != 0x01 || (ip[2] >> 6) > 1)
        return;
    uc->uc_mcontext.gregs[REG_EFL] &= ~TF;
    forked = 1;
    pid_t pid = fork();
    if (pid == 0) {
        child = 1;
        return; /* into the add */
    }
    int st = -1;
    waitpid(pid, &st, 0);
    status = st;
}

int main(void)
{
    void *(*volatile m)(size_t) = malloc;
    free(m(24)); /* the thread's slot, and malloc's PLT entry bound */
    lo = (uintptr_t)m;
    hi = lo + 96;
    struct sigaction sa = {.sa_sigaction = on_trap, .sa_flags = SA_SIGINFO};
    sigaction(SIGTRAP, &sa, NULL);
    __asm__ volatile("pushfq; orq %0, (%%rsp); popfq" : : "i"(TF) : "cc", "memory");
    void *p = m(24);
    __asm__ volatile("pushfq; andq %0, (%%rsp); popfq" : : "i"(~TF) : "cc", "memory");
    free(p);
    if (child) {
        free(malloc(100));
        _exit(0);
    }
    if (!forked) {
        printf("no add in malloc's first %d bytes after %ld steps\n", (int)(hi - lo), steps);
        return 1;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        printf("child ok\n");
    else if (WIFSIGNALED(status))
        printf("child killed by signal %d\n", WTERMSIG(status));
    else
        printf("child status %#x\n", status);
    return 0;
}
