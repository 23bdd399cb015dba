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
 *   {"marks": [{"name": N, "in_use": U, "peak_before": P,
 *               "own_in_use": OU, "own_peak_before": OP}, ...],
 *    "in_use": U, "peak_since_last": P}
 *
 * to $LOOM_MEMCOUNT_OUT (".<rank>" appended under mpirun). OU and OP are
 * the same without the blocks that the code of the libraries
 * $LOOM_MEMCOUNT_LIBRARIES names allocated itself (substrings of their
 * file names, comma-separated, found at the first mark; told by the
 * caller's address, so not what they allocate through operator new): a
 * reader can tell a library's own buffers from the rest. The marks `loom
 * run` makes are in runtime/tool/RunPlan.cpp.
 * Plain C over glibc's __libc_* entry points, so that counting never
 * allocates.
 *===--------------------------------------------------------------------===*/

#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
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

/* The code of the libraries named by $LOOM_MEMCOUNT_LIBRARIES (substrings
 * of their file names, comma-separated), found at the first mark. */
enum { kMaxRanges = 32 };
static uintptr_t rangeBegin[kMaxRanges], rangeEnd[kMaxRanges];
static _Atomic int ranges;

/* Blocks allocated by calls from that code and not yet freed: an
 * open-addressing table (backward-shift deletion) under a spin lock, their
 * bytes, and the high-water of every other byte ("own"). Past half the
 * table, blocks count as the program's own. */
enum { kSlots = 1 << 16 };
static uintptr_t slotPointer[kSlots];
static long long slotBytes[kSlots];
static atomic_flag tableLock = ATOMIC_FLAG_INIT;
static _Atomic int libraryBlocks;
static _Atomic long long libraryInUse, ownPeak;
static long long markOwnInUse[kMaxMarks], markOwnPeak[kMaxMarks];

static int fromLibrary(const void *caller) {
  uintptr_t at = (uintptr_t)caller;
  int n = atomic_load(&ranges);
  for (int i = 0; i < n; ++i)
    if (at >= rangeBegin[i] && at < rangeEnd[i])
      return 1;
  return 0;
}

static void lockTable(void) {
  while (atomic_flag_test_and_set_explicit(&tableLock, memory_order_acquire)) {
  }
}

static void unlockTable(void) {
  atomic_flag_clear_explicit(&tableLock, memory_order_release);
}

static size_t slotOf(uintptr_t p) {
  return (size_t)(((uint64_t)(p >> 4) * 0x9E3779B97F4A7C15ull) >> 50) &
         (kSlots - 1);
}

/* Under the lock: remembers library block p; 0 when the table is full. */
static int remember(uintptr_t p, long long bytes) {
  if (atomic_load(&libraryBlocks) >= kSlots / 2)
    return 0;
  size_t i = slotOf(p);
  while (slotPointer[i])
    i = (i + 1) & (kSlots - 1);
  slotPointer[i] = p;
  slotBytes[i] = bytes;
  atomic_fetch_add(&libraryBlocks, 1);
  return 1;
}

/* Under the lock: forgets block p; its bytes, or -1 if it is not there. */
static long long forget(uintptr_t p) {
  size_t i = slotOf(p);
  while (slotPointer[i] && slotPointer[i] != p)
    i = (i + 1) & (kSlots - 1);
  if (!slotPointer[i])
    return -1;
  long long bytes = slotBytes[i];
  /* Backward shift: move later entries of the probe run into the hole. */
  size_t j = i;
  for (;;) {
    slotPointer[i] = 0;
    for (;;) {
      j = (j + 1) & (kSlots - 1);
      if (!slotPointer[j]) {
        atomic_fetch_sub(&libraryBlocks, 1);
        return bytes;
      }
      size_t home = slotOf(slotPointer[j]);
      int between = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (!between)
        break;
    }
    slotPointer[i] = slotPointer[j];
    slotBytes[i] = slotBytes[j];
    i = j;
  }
}

static void raiseTo(_Atomic long long *high, long long now) {
  long long old = atomic_load(high);
  while (now > old && !atomic_compare_exchange_weak(high, &old, now)) {
  }
}

static void charge(void *p, const void *caller) {
  if (!p)
    return;
  long long size = (long long)malloc_usable_size(p);
  if (fromLibrary(caller)) {
    lockTable();
    if (remember((uintptr_t)p, size))
      atomic_fetch_add(&libraryInUse, size);
    unlockTable();
  }
  long long now = atomic_fetch_add(&inUse, size) + size;
  raiseTo(&peak, now);
  raiseTo(&ownPeak, now - atomic_load(&libraryInUse));
}

/* Before the block goes back to the allocator (which may hand its address
 * out again at once). */
static void release(void *p) {
  if (!p)
    return;
  long long size = (long long)malloc_usable_size(p);
  if (atomic_load(&libraryBlocks) > 0) {
    lockTable();
    long long bytes = forget((uintptr_t)p);
    if (bytes >= 0)
      atomic_fetch_sub(&libraryInUse, bytes);
    unlockTable();
  }
  atomic_fetch_sub(&inUse, size);
}

static void *alignedAllocation(size_t align, size_t n, const void *caller) {
  void *p = __libc_memalign(align, n);
  charge(p, caller);
  return p;
}

#define CALLER __builtin_return_address(0)

void *malloc(size_t n) {
  void *p = __libc_malloc(n);
  charge(p, CALLER);
  return p;
}

void free(void *p) {
  release(p);
  __libc_free(p);
}

void *calloc(size_t n, size_t size) {
  void *p = __libc_calloc(n, size);
  charge(p, CALLER);
  return p;
}

void *realloc(void *old, size_t n) {
  /* Released first: the allocator may free `old` and hand its address out
   * again before this returns. A failed realloc leaves `old` uncounted. */
  release(old);
  void *p = __libc_realloc(old, n);
  charge(p, CALLER);
  return p;
}

void *memalign(size_t align, size_t n) {
  return alignedAllocation(align, n, CALLER);
}

void *aligned_alloc(size_t align, size_t n) {
  return alignedAllocation(align, n, CALLER);
}

int posix_memalign(void **out, size_t align, size_t n) {
  if (align < sizeof(void *) || (align & (align - 1)) != 0)
    return EINVAL;
  void *p = alignedAllocation(align, n, CALLER);
  if (!p)
    return ENOMEM;
  *out = p;
  return 0;
}

void *valloc(size_t n) {
  return alignedAllocation((size_t)sysconf(_SC_PAGESIZE), n, CALLER);
}

void *pvalloc(size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return alignedAllocation(page, (n + page - 1) / page * page, CALLER);
}

/* Records the executable segments of the libraries named by
 * $LOOM_MEMCOUNT_LIBRARIES. */
static int addLibrary(struct dl_phdr_info *info, size_t size, void *names) {
  (void)size;
  const char *name = info->dlpi_name;
  if (!name || !*name)
    return 0;
  const char *list = (const char *)names;
  int match = 0;
  while (*list && !match) {
    const char *end = strchr(list, ',');
    size_t len = end ? (size_t)(end - list) : strlen(list);
    char wanted[256];
    if (len > 0 && len < sizeof wanted) {
      memcpy(wanted, list, len);
      wanted[len] = 0;
      match = strstr(name, wanted) != NULL;
    }
    list += len + (end ? 1 : 0);
  }
  for (int i = 0; match && i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    int n = atomic_load(&ranges);
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || n >= kMaxRanges)
      continue;
    rangeBegin[n] = info->dlpi_addr + ph->p_vaddr;
    rangeEnd[n] = rangeBegin[n] + ph->p_memsz;
    atomic_store(&ranges, n + 1);
  }
  return 0;
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
                    "\"peak_before\": %lld, \"own_in_use\": %lld, "
                    "\"own_peak_before\": %lld}",
                    i ? ", " : "", markName[i], markInUse[i], markPeak[i],
                    markOwnInUse[i], markOwnPeak[i]);
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
  const char *libraries = getenv("LOOM_MEMCOUNT_LIBRARIES");
  if (i == 0 && libraries && *libraries)
    dl_iterate_phdr(addLibrary, (void *)libraries);
  if (i < kMaxMarks) {
    markOwnInUse[i] = atomic_load(&inUse) - atomic_load(&libraryInUse);
    markOwnPeak[i] = atomic_load(&ownPeak);
    snprintf(markName[i], sizeof markName[i], "%s", what);
    markInUse[i] = atomic_load(&inUse);
    markPeak[i] = atomic_load(&peak);
    atomic_store(&marks, i + 1);
  }
  /* The high-water from here on. */
  atomic_store(&peak, atomic_load(&inUse));
  atomic_store(&ownPeak, atomic_load(&inUse) - atomic_load(&libraryInUse));
  if (strcmp(what, "end") == 0)
    writeReport();
}

__attribute__((destructor)) static void atExit(void) { writeReport(); }
