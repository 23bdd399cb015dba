/*===- memcount.c - A heap high-water mark, measured from outside -------===*
 *
 * Preloaded into a process (LD_PRELOAD), it counts every byte the process
 * holds from the C heap (malloc, calloc, realloc, the aligned allocators;
 * operator new and the libraries' allocations go through them) and keeps
 * the high-water mark. It is the independent side of Loom's memory oracle
 * (test/e2e/memory_measured.py): the executor's own account
 * (Executor::peakBytes) only sees what the executor allocates, this sees
 * what every kernel and library allocates too.
 *
 * Bytes are counted as the allocator holds them (malloc_usable_size: the
 * request rounded up to the allocator's granule, a page for a mapped
 * block). A program marks points of its run by calling
 * `loom_memory_mark(name)`, which it looks up at run time (dlsym), so that
 * nothing is called without this library. At each mark the counter records
 * the bytes in use and the high-water since the previous mark; the mark
 * "end" (or the process's exit) writes
 *
 *   {"marks": [{"name": N, "in_use": U, "peak_before": P}, ...],
 *    "in_use": U, "peak_since_last": P}
 *
 * to $LOOM_MEMCOUNT_OUT (".<rank>" appended under mpirun). The marks `loom
 * run` makes are in runtime/tool/RunPlan.cpp.
 * Plain C over glibc's __libc_* entry points, so that counting never
 * allocates.
 *===--------------------------------------------------------------------===*/

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

/* Marks in order; at each, the bytes in use and the high-water since the
 * previous mark. */
enum { kMaxMarks = 16 };
static _Atomic long long inUse, peak;
static _Atomic int marks, written;
static char markName[kMaxMarks][32];
static long long markInUse[kMaxMarks], markPeak[kMaxMarks];

static void charge(void *p) {
  if (!p)
    return;
  long long now = atomic_fetch_add(&inUse, (long long)malloc_usable_size(p)) +
                  (long long)malloc_usable_size(p);
  long long old = atomic_load(&peak);
  while (now > old && !atomic_compare_exchange_weak(&peak, &old, now)) {
  }
}

static void release(void *p) {
  if (p)
    atomic_fetch_sub(&inUse, (long long)malloc_usable_size(p));
}

void *malloc(size_t n) {
  void *p = __libc_malloc(n);
  charge(p);
  return p;
}

void free(void *p) {
  release(p);
  __libc_free(p);
}

void *calloc(size_t n, size_t size) {
  void *p = __libc_calloc(n, size);
  charge(p);
  return p;
}

void *realloc(void *old, size_t n) {
  size_t before = old ? malloc_usable_size(old) : 0;
  void *p = __libc_realloc(old, n);
  if (!p)
    return p; /* old is untouched (or n was 0 and old freed: rare, uncounted) */
  atomic_fetch_sub(&inUse, (long long)before);
  charge(p);
  return p;
}

void *memalign(size_t align, size_t n) {
  void *p = __libc_memalign(align, n);
  charge(p);
  return p;
}

void *aligned_alloc(size_t align, size_t n) { return memalign(align, n); }

int posix_memalign(void **out, size_t align, size_t n) {
  if (align < sizeof(void *) || (align & (align - 1)) != 0)
    return EINVAL;
  void *p = memalign(align, n);
  if (!p)
    return ENOMEM;
  *out = p;
  return 0;
}

void *valloc(size_t n) { return memalign((size_t)sysconf(_SC_PAGESIZE), n); }

void *pvalloc(size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return memalign(page, (n + page - 1) / page * page);
}

static void writeReport(void) {
  if (atomic_exchange(&written, 1))
    return;
  const char *path = getenv("LOOM_MEMCOUNT_OUT");
  if (!path || !*path)
    return;
  char name[4096];
  const char *rank = getenv("OMPI_COMM_WORLD_RANK");
  if (rank)
    snprintf(name, sizeof name, "%s.%s", path, rank);
  else
    snprintf(name, sizeof name, "%s", path);
  int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return;
  char text[4096];
  int len = snprintf(text, sizeof text, "{\"marks\": [");
  int n = atomic_load(&marks);
  for (int i = 0; i < n && len < (int)sizeof text - 200; ++i)
    len += snprintf(text + len, sizeof text - (size_t)len,
                    "%s{\"name\": \"%s\", \"in_use\": %lld, "
                    "\"peak_before\": %lld}",
                    i ? ", " : "", markName[i], markInUse[i], markPeak[i]);
  len += snprintf(text + len, sizeof text - (size_t)len,
                  "], \"in_use\": %lld, \"peak_since_last\": %lld}\n",
                  atomic_load(&inUse), atomic_load(&peak));
  if (write(fd, text, (size_t)len) != len) {
    /* nothing to do: the reader finds a short file and fails */
  }
  close(fd);
}

/* Called from one thread at a time (the tool marks from its rank's thread
 * between steps). */
void loom_memory_mark(const char *what) {
  int i = atomic_load(&marks);
  if (i < kMaxMarks) {
    snprintf(markName[i], sizeof markName[i], "%s", what);
    markInUse[i] = atomic_load(&inUse);
    markPeak[i] = atomic_load(&peak);
    atomic_store(&marks, i + 1);
  }
  /* The high-water from here on. */
  atomic_store(&peak, atomic_load(&inUse));
  if (strcmp(what, "end") == 0)
    writeReport();
}

__attribute__((destructor)) static void atExit(void) { writeReport(); }
