// stacks.c: allocations on stacks that are not a thread's own: a
// coroutine's (makecontext, its stack from malloc and from mmap) and a
// signal handler's on sigaltstack. Sampled at every allocation, the walk
// must stop safely on each. Prints "ok N" with N the blocks allocated.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

static ucontext_t main_ctx, co_ctx;
static volatile long blocks;

static void churn(int n)
{
    for (int i = 0; i < n; i++) {
        free(malloc(32 + (size_t)(i % 300)));
        blocks++;
    }
}

static void coroutine(void)
{
    for (int round = 0; round < 50; round++) {
        churn(20);
        swapcontext(&co_ctx, &main_ctx);
    }
}

static void handler(int sig)
{
    (void)sig;
    churn(5); /* not async-signal-safe in general; glibc's malloc copes here */
}

static void run_on(void *stack, size_t size)
{
    getcontext(&co_ctx);
    co_ctx.uc_stack.ss_sp = stack;
    co_ctx.uc_stack.ss_size = size;
    co_ctx.uc_link = &main_ctx;
    makecontext(&co_ctx, coroutine, 0);
    for (int round = 0; round < 51; round++)
        swapcontext(&main_ctx, &co_ctx);
}

int main(void)
{
    size_t size = 256 << 10;
    run_on(malloc(size), size);
    run_on(mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), size);
    stack_t ss = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);
    for (int i = 0; i < 200; i++)
        raise(SIGUSR1);
    printf("ok %ld\n", blocks);
    return 0;
}
