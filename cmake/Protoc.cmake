# .proto files compiled to C++ at build time by Debian's protoc (protobuf-compiler), into a
# static library that links Debian's libprotobuf. Nothing is downloaded.
#   ingero_proto_library(TARGET ROOT FILE...)
# FILEs are relative to ROOT, which is the import root (`import "a/b.proto"` finds ROOT/a/b.proto);
# the generated headers are included the same way ("a/b.pb.h").
find_package(Protobuf REQUIRED)

function(ingero_proto_library target root)
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/${target}_gen)
  file(MAKE_DIRECTORY ${gen})
  set(all_protos)
  foreach(rel ${ARGN})
    list(APPEND all_protos ${root}/${rel})
  endforeach()
  set(sources)
  foreach(rel ${ARGN})
    string(REGEX REPLACE "\\.proto$" "" base ${rel})
    set(out ${gen}/${base}.pb.cc ${gen}/${base}.pb.h)
    add_custom_command(
      OUTPUT ${out}
      COMMAND protobuf::protoc --cpp_out=${gen} -I ${root} ${root}/${rel}
      DEPENDS ${all_protos} protobuf::protoc
      COMMENT "protoc ${rel}"
      VERBATIM)
    list(APPEND sources ${gen}/${base}.pb.cc)
  endforeach()
  add_library(${target} STATIC ${sources})
  # Generated code: its warnings are protoc's, not ours.
  target_compile_options(${target} PRIVATE -w)
  target_include_directories(${target} SYSTEM PUBLIC ${gen})
  target_link_libraries(${target} PUBLIC protobuf::libprotobuf)
endfunction()
