// Force-included in sanitizer builds (LOOM_SANITIZE). Debian's libMLIR and
// libLLVM are not built with AddressSanitizer, but LLVM's headers poison
// allocator memory from inline code whenever the including file is. Memory
// poisoned by Loom's instrumented copy of that inline code and then used by
// the uninstrumented library is reported as use-after-poison, falsely. Make
// the header-level poisoning a no-op; ASan still checks all of Loom's own
// accesses and every heap allocation.
#pragma once
#if defined(__cplusplus) && __has_include("llvm/Support/Compiler.h")
#include "llvm/Support/Compiler.h"
#undef __asan_poison_memory_region
#undef __asan_unpoison_memory_region
#define __asan_poison_memory_region(p, size) ((void)(p), (void)(size))
#define __asan_unpoison_memory_region(p, size) ((void)(p), (void)(size))
#endif
