// Layering.VocabularyBinary's binary: the vocabulary libraries linked whole (see
// tests/layering/layering.cmake). It runs nothing; that it links, and what it loads, is the
// test.
#include "hal/demangle.h"

int main() { return ingero::hal::demangle("_Z1fv") == "f()" ? 0 : 1; }
