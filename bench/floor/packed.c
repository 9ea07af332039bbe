/* bench/floor prototype: see README.md. Not a profiler. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
static void *(*nm)(size_t); static void (*nf)(void*);
__attribute__((constructor(101))) static void init(void){ nm = dlsym(RTLD_NEXT,"malloc"); nf = dlsym(RTLD_NEXT,"free"); }
#define H(p) (((size_t*)(p))[-1])
struct slot { uint64_t wa, wf, x[6]; } __attribute__((aligned(64)));
#ifdef PER_THREAD
/* bin/libfloor.so (make), heapctl overhead --floor: a slot per thread, as
   the shim has, so that churn-4t's floor is the counting, not a shared line. */
static __thread struct slot own __attribute__((tls_model("initial-exec")));
#define me (&own)
#else
struct slot sl;
__thread struct slot *me __attribute__((tls_model("initial-exec"))) = &sl;
#endif
__attribute__((noinline,cold)) static void *slowm(void *p){ return p; }
__attribute__((noinline,cold)) static void slowf(void *p){ nf(p); }
#define FAST_MASK 0xfffffffffffe0002ull
__attribute__((visibility("default"))) void *malloc(size_t n){
  void *p = nm(n);
  if (__builtin_expect(!p,0)) return p;
  size_t h = H(p);
  if (__builtin_expect(h & FAST_MASK, 0)) return slowm(p);
  struct slot *s = me;
  uint64_t inc = ((h & ~(uint64_t)15) << 46) | 1, out;
  if (__builtin_expect(__builtin_add_overflow(s->wa, inc, &out), 0)) { s->wa = out; return slowm(p); }
  s->wa = out;
  return p;
}
__attribute__((visibility("default"))) void free(void *p){
  if (__builtin_expect(!p,0)) return;
  size_t h = H(p);
  if (__builtin_expect(h & FAST_MASK, 0)) return slowf(p);
  struct slot *s = me;
  uint64_t inc = ((h & ~(uint64_t)15) << 46) | 1, out;
  if (__builtin_expect(__builtin_add_overflow(s->wf, inc, &out), 0)) { s->wf = out; return slowf(p); }
  s->wf = out;
  nf(p);
}
