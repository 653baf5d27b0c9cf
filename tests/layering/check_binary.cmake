# Layering.VocabularyBinary: BINARY is linked from the vocabulary libraries only (whole
# archives); it must not load libbpf, libelf or libdw, directly or through another library.
cmake_minimum_required(VERSION 3.25)
find_program(LDD ldd REQUIRED)
execute_process(COMMAND ${LDD} "${BINARY}" OUTPUT_VARIABLE out ERROR_VARIABLE err
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd ${BINARY} failed (${rc}): ${err}")
endif()
string(REGEX MATCHALL "libc\\.so\\.[0-9]+" libc "${out}")
if(NOT libc)
  message(FATAL_ERROR "ldd ${BINARY} names no libc: not a dynamic binary?\n${out}")
endif()
string(REGEX MATCHALL "lib(bpf|elf|dw)[-.][^ \t\n]*" found "${out}")
if(found)
  list(REMOVE_DUPLICATES found)
  message(FATAL_ERROR "${BINARY} loads ${found}:\n${out}")
endif()
message(STATUS "${BINARY}: no libbpf, libelf or libdw among its libraries")
