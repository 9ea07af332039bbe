// forks.c: a threaded program that forks. Two threads allocate without
// pause while the main thread forks N children, each of which allocates
// and exits; the parent waits for each with a deadline. Prints
// "forks N hung H": a child that does not exit within 5 s is killed and
// counted as hung (a lock its parent's thread held).
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

static void *churn(void *arg)
{
    void *keep[64] = {0};
    for (unsigned i = 0; !stop; i++) {
        free(keep[i % 64]);
        keep[i % 64] = malloc(16 + (i * 2654435761u) % 3000);
    }
    for (int i = 0; i < 64; i++)
        free(keep[i]);
    return arg;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1500, hung = 0;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, churn, NULL);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int j = 0; j < 100; j++)
                free(malloc(100 + (size_t)j * 50));
            _exit(0);
        }
        int status, done = 0;
        for (int ms = 0; ms < 5000 && !done; ms++) {
            done = waitpid(pid, &status, WNOHANG) == pid;
            if (!done) {
                struct timespec d = {0, 1000000};
                nanosleep(&d, NULL);
            }
        }
        if (!done) {
            hung++;
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
    }
    stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("forks %d hung %d\n", n, hung);
    return 0;
}
