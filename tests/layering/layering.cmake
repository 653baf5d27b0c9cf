# --- unit: the vocabulary builds without the BPF toolchain ------------------------------
# hal/ is the vocabulary; the probe machinery (libbpf, libelf, libdw) is probe/. Two checks
# that the rooms above the vocabulary never reach the probe machinery:
#   Layering.LinkInterface   every library below, followed through its link interface
#                            recursively, names no probe/capture/kernelside target and no
#                            libbpf, libelf or libdw;
#   Layering.VocabularyBinary  a binary made of the whole of those libraries (whole-archive,
#                            so every object and every undefined reference is linked) loads
#                            none of libbpf, libelf or libdw (ldd).
get_property(_backends GLOBAL PROPERTY INGERO_BACKEND_LIBRARIES)
set(INGERO_VOCABULARY_LIBRARIES ingero_hal ingero_engine ingero_store ingero_fleet
  ingero_serve_http ingero_serve_metrics ingero_serve_export ingero_serve_otlp ingero_serve_mcp
  ingero_serve_report ingero_kernelside_names ingero_compress ${_backends})

# Every item reachable from `target` through LINK_LIBRARIES and INTERFACE_LINK_LIBRARIES.
function(ingero_link_closure target out)
  set(seen "")
  set(queue ${target})
  while(queue)
    list(POP_FRONT queue item)
    if(item MATCHES "^\\$<LINK_ONLY:(.*)>$")
      set(item "${CMAKE_MATCH_1}")
    endif()
    if(item STREQUAL "" OR item IN_LIST seen)
      continue()
    endif()
    list(APPEND seen "${item}")
    if(TARGET "${item}")
      get_target_property(type "${item}" TYPE)
      get_target_property(deps "${item}" INTERFACE_LINK_LIBRARIES)
      if(deps)
        list(APPEND queue ${deps})
      endif()
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        get_target_property(deps "${item}" LINK_LIBRARIES)
        if(deps)
          list(APPEND queue ${deps})
        endif()
      endif()
    endif()
  endwhile()
  list(REMOVE_ITEM seen ${target})
  set(${out} "${seen}" PARENT_SCOPE)
endfunction()

set(_closures "")
foreach(lib IN LISTS INGERO_VOCABULARY_LIBRARIES)
  ingero_link_closure(${lib} _deps)
  string(REPLACE ";" "," _deps "${_deps}")
  string(APPEND _closures "${lib}=${_deps}\n")
endforeach()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/vocabulary_link_closure.txt "${_closures}")
add_test(NAME Layering.LinkInterface
  COMMAND ${CMAKE_COMMAND} -DCLOSURES=${CMAKE_CURRENT_BINARY_DIR}/vocabulary_link_closure.txt
          -P ${CMAKE_CURRENT_SOURCE_DIR}/layering/check_link_interface.cmake)

add_executable(ingero_vocabulary_binary layering/vocabulary_main.cc)
# --no-as-needed: every shared library on the link line is recorded, used or not.
target_link_options(ingero_vocabulary_binary PRIVATE -Wl,--no-as-needed)
target_link_libraries(ingero_vocabulary_binary PRIVATE -Wl,--whole-archive
  ${INGERO_VOCABULARY_LIBRARIES} -Wl,--no-whole-archive ${INGERO_VOCABULARY_LIBRARIES})
add_test(NAME Layering.VocabularyBinary
  COMMAND ${CMAKE_COMMAND} -DBINARY=$<TARGET_FILE:ingero_vocabulary_binary>
          -P ${CMAKE_CURRENT_SOURCE_DIR}/layering/check_binary.cmake)
set_tests_properties(Layering.LinkInterface Layering.VocabularyBinary PROPERTIES LABELS unit)
add_dependencies(ingero_unit_tests ingero_vocabulary_binary)
