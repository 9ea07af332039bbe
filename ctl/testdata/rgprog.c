#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 32
static void *blk[2 * N];
static size_t usable;
static sem_t go_a, go_b, done_a, done_b, quit;

static void say(const char *s) { if (write(1, s, strlen(s)) < 0) _exit(4); }
static void hold(void) { char c; do { if (read(0, &c, 1) != 1) _exit(3); } while (c != '\n'); }

static void *thread_a(void *arg) {
	(void)arg;
	sem_wait(&go_a);
	for (int i = 0; i < N; i++) { blk[i] = malloc(1000 + 16 * i); usable += malloc_usable_size(blk[i]); }
	sem_post(&done_a);
	sem_wait(&quit); /* parked, not exiting: a thread exit would run while the test reads */
	return NULL;
}

static void *thread_b(void *arg) {
	(void)arg;
	sem_wait(&go_b);
	for (int i = 0; i < N; i++) free(blk[i]);
	sem_post(&done_b);
	sem_wait(&quit);
	return NULL;
}

static int steps(void) {
	pthread_t a, b;
	char line[64];
	sem_init(&go_a, 0, 0); sem_init(&go_b, 0, 0); sem_init(&done_a, 0, 0); sem_init(&done_b, 0, 0); sem_init(&quit, 0, 0);
	pthread_create(&a, NULL, thread_a, NULL);
	pthread_create(&b, NULL, thread_b, NULL);
	snprintf(line, sizeof line, "pid %d\n", (int)getpid());
	say(line);
	say("base\n"); hold();
	sem_post(&go_a); sem_wait(&done_a);
	for (int i = N; i < 2 * N; i++) { blk[i] = malloc(2000 + 8 * i); usable += malloc_usable_size(blk[i]); }
	snprintf(line, sizeof line, "alloc %zu\n", usable);
	say(line); hold();
	sem_post(&go_b); sem_wait(&done_b);
	for (int i = N; i < 2 * N; i++) free(blk[i]);
	say("freed\n"); hold();
	sem_post(&quit); sem_post(&quit);
	pthread_join(a, NULL); pthread_join(b, NULL);
	return 0;
}

static void *park(void *arg) { (void)arg; for (;;) pause(); return NULL; }

/* The main thread leaves with pthread_exit, another runs on: the process
 * lives, but /proc/<pid>/maps, the leader's, is empty. */
static int pexit(void) {
	pthread_t t;
	char line[64];
	pthread_create(&t, NULL, park, NULL);
	snprintf(line, sizeof line, "pid %d\n", (int)getpid());
	say(line);
	pthread_exit(NULL);
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "steps") == 0) return steps();
	if (argc == 2 && strcmp(argv[1], "pexit") == 0) return pexit();
	if (argc < 3) return 2;
	if (strcmp(argv[1], "spawn") == 0) {
		pid_t c = fork();
		if (c == 0) { execl("/proc/self/exe", argv[0], "exit", argv[2], (char *)NULL); _exit(127); }
		int st;
		if (c < 0 || waitpid(c, &st, 0) != c) return 2;
		return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
	}
	int n = atoi(argv[2]);
	static void *p[4096]; /* not calloc'd: its size would differ with n */
	if (n < 0 || n > 4096) return 2;
	size_t alloc = 0, freed = 0;
	for (int i = 0; i < n; i++) { p[i] = malloc(1000); alloc += malloc_usable_size(p[i]); }
	for (int i = 0; i < n; i += 2) { freed += malloc_usable_size(p[i]); free(p[i]); }
	char line[128];
	snprintf(line, sizeof line, "pid %d alloc %zu freed %zu\n", (int)getpid(), alloc, freed);
	say(line);
	if (strcmp(argv[1], "kill") == 0) raise(SIGKILL);
	return argc > 3 ? atoi(argv[3]) : 0;
}
