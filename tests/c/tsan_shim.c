/* Rust's ThreadSanitizer instrumentation (LLVM) calls __tsan_memcpy, __tsan_memmove and
 * __tsan_memset; GCC's libtsan (what these tests link) intercepts memcpy, memmove and memset
 * under their own names instead. Forwarding keeps the accesses checked by the interceptors. */
#include <string.h>

void *__tsan_memcpy(void *dst, const void *src, size_t n) { return memcpy(dst, src, n); }
void *__tsan_memmove(void *dst, const void *src, size_t n) { return memmove(dst, src, n); }
void *__tsan_memset(void *dst, int c, size_t n) { return memset(dst, c, n); }
