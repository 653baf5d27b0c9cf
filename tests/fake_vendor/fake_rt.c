/* libfakert.so: a runtime no built-in backend knows, for the add-a-backend test. */
#include <stddef.h>

__attribute__((visibility("default"))) int fakeAlloc(size_t n) { return n > 0 ? 0 : 1; }
__attribute__((visibility("default"))) int fakeSync(void* stream) { return stream ? 0 : 1; }
