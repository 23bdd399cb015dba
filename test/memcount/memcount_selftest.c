/*===- memcount_selftest.c - The heap counter counts what it should -----===*
 *
 * Run with the counter preloaded (ctest memcount-self-test): allocates
 * known blocks through each entry point between marks, then checks the
 * counter's report against them. Exit 0 when every figure is right.
 *===--------------------------------------------------------------------===*/

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void mark(const char *what) {
  void (*m)(const char *) =
      (void (*)(const char *))dlsym(RTLD_DEFAULT, "loom_memory_mark");
  if (!m) {
    fprintf(stderr, "memcount self-test: the counter is not preloaded\n");
    exit(1);
  }
  m(what);
}

/* Reads "in_use" and "peak_before" of mark `index` from the report. */
static int readMark(const char *text, int index, long long *inUse,
                    long long *peak) {
  const char *p = text;
  for (int i = 0; i <= index; ++i) {
    p = strstr(p, "{\"name\"");
    if (!p)
      return 0;
    if (i < index)
      ++p;
  }
  const char *u = strstr(p, "\"in_use\": ");
  const char *k = strstr(p, "\"peak_before\": ");
  if (!u || !k)
    return 0;
  *inUse = atoll(u + 10);
  *peak = atoll(k + 15);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: memcount_selftest REPORT (= $LOOM_MEMCOUNT_OUT)\n");
    return 2;
  }
  const long long mib = 1 << 20;
  mark("begin");
  char *a = malloc(4 * mib);          /* +4 MiB */
  memset(a, 1, 4 * mib);
  void *b = NULL;
  if (posix_memalign(&b, 4096, 2 * mib) != 0) /* +2 MiB */
    return 1;
  mark("allocated");                  /* in use: begin + 6 MiB */
  char *c = calloc(1, 3 * mib);       /* +3: peak begin + 9 MiB */
  free(c);
  a = realloc(a, 8 * mib);            /* 4 -> 8: in use begin + 10 MiB */
  free(b);                            /* in use begin + 8 MiB */
  mark("end");
  free(a);

  FILE *f = fopen(argv[1], "r");
  if (!f) {
    fprintf(stderr, "memcount self-test: no report at %s\n", argv[1]);
    return 1;
  }
  char text[4096] = {0};
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  long long u0, p0, u1, p1, u2, p2;
  if (!readMark(text, 0, &u0, &p0) || !readMark(text, 1, &u1, &p1) ||
      !readMark(text, 2, &u2, &p2)) {
    fprintf(stderr, "memcount self-test: report without three marks: %s\n",
            text);
    return 1;
  }
  /* The allocator's granule adds at most a page a block. */
  const long long slack = 3 * 4096 + 256;
  int ok = 1;
#define EXPECT_NEAR_BYTES(what, got, want)                                    \
  do {                                                                         \
    if ((got) < (want) || (got) > (want) + slack) {                            \
      fprintf(stderr, "memcount self-test: %s is %lld bytes, expected %lld\n", \
              what, (long long)(got), (long long)(want));                      \
      ok = 0;                                                                  \
    }                                                                          \
  } while (0)
  EXPECT_NEAR_BYTES("in use at 'allocated' over 'begin'", u1 - u0, 6 * mib);
  EXPECT_NEAR_BYTES("the high-water before 'allocated'", p1 - u0, 6 * mib);
  EXPECT_NEAR_BYTES("the high-water before 'end'", p2 - u0, 10 * mib);
  EXPECT_NEAR_BYTES("in use at 'end'", u2 - u0, 8 * mib);
  if (ok)
    printf("memcount self-test: 4 figures right (%s)\n", text);
  return ok ? 0 : 1;
}
