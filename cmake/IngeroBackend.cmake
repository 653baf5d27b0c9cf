# ingero_add_backend(NAME SOURCES file.cc...): one vendor backend in one line.
#
# Builds the static library ingero_backend_NAME from SOURCES (relative to the calling folder),
# linked to hal/ only (a backend depends on nothing else), and, when called from backends/,
# adds it to the global list INGERO_BACKEND_LIBRARIES that the app links. Its factory is then
# registered in app/builtin_backends.cc. Called from tests/, it builds a test-only backend
# that test registries add and the ingero binary never contains (app/ has read the list by
# then). docs/adding-a-backend.md shows the whole of adding a backend.
function(ingero_add_backend name)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "ingero_add_backend(${name}): no SOURCES")
  endif()
  add_library(ingero_backend_${name} STATIC ${ARG_SOURCES})
  target_link_libraries(ingero_backend_${name} PUBLIC ingero_hal)
  set_property(GLOBAL APPEND PROPERTY INGERO_BACKEND_LIBRARIES ingero_backend_${name})
endfunction()
