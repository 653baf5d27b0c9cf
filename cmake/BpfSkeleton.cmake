# BPF objects: clang -target bpf, CO-RE against a vmlinux.h dumped from the running kernel's
# BTF at build time, then a libbpf skeleton header (NAME.skel.h, struct NAME_bpf).
find_program(BPF_CLANG NAMES clang clang-14 REQUIRED)
find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)
set(INGERO_VMLINUX_BTF "/sys/kernel/btf/vmlinux" CACHE FILEPATH "BTF used to generate vmlinux.h")
set(INGERO_BPF_GEN_DIR ${CMAKE_BINARY_DIR}/bpf)

execute_process(COMMAND uname -m OUTPUT_VARIABLE _arch OUTPUT_STRIP_TRAILING_WHITESPACE)
if(_arch STREQUAL "x86_64")
  set(BPF_TARGET_ARCH x86)
elseif(_arch STREQUAL "aarch64")
  set(BPF_TARGET_ARCH arm64)
else()
  message(FATAL_ERROR "unsupported architecture ${_arch}")
endif()

add_custom_command(
  OUTPUT ${INGERO_BPF_GEN_DIR}/vmlinux.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${INGERO_BPF_GEN_DIR}
  COMMAND ${BPFTOOL} btf dump file ${INGERO_VMLINUX_BTF} format c > ${INGERO_BPF_GEN_DIR}/vmlinux.h.tmp
  COMMAND ${CMAKE_COMMAND} -E rename ${INGERO_BPF_GEN_DIR}/vmlinux.h.tmp ${INGERO_BPF_GEN_DIR}/vmlinux.h
  COMMENT "Generating vmlinux.h from ${INGERO_VMLINUX_BTF}")
# With the Makefile generator a custom command's OUTPUT is only known to rules of the
# directory that declares it, so skeletons in other directories reach vmlinux.h through this
# target: every target building a skeleton must depend on ingero_vmlinux (a clean build
# otherwise fails with "No rule to make target vmlinux.h").
add_custom_target(ingero_vmlinux DEPENDS ${INGERO_BPF_GEN_DIR}/vmlinux.h)

# ingero_bpf_skeleton(NAME SRC_DIR OUT_VAR [SOURCES...]): SRC_DIR/NAME.bpf.c, or the listed
# *.bpf.c files compiled one by one and linked into one object (bpftool gen object: extern maps
# and functions resolve across them) -> NAME.skel.h
function(ingero_bpf_skeleton name src_dir out_var)
  set(srcs ${ARGN})
  if(NOT srcs)
    set(srcs ${name}.bpf.c)
  endif()
  set(out ${INGERO_BPF_GEN_DIR})
  file(GLOB _hdrs ${src_dir}/*.h ${PROJECT_SOURCE_DIR}/bpf/*.h)
  set(_objs)
  set(_cmds)
  foreach(src ${srcs})
    get_filename_component(_base ${src} NAME_WE)
    set(_obj ${out}/${name}.${_base}.bpf.o)
    list(APPEND _objs ${_obj})
    list(APPEND _cmds COMMAND ${BPF_CLANG} -g -O2 -Wall -Werror -target bpf
         -D__TARGET_ARCH_${BPF_TARGET_ARCH} -I${out} -I${src_dir} -I${PROJECT_SOURCE_DIR}/bpf
         -c ${src_dir}/${src} -o ${_obj})
    list(APPEND _deps ${src_dir}/${src})
  endforeach()
  add_custom_command(
    OUTPUT ${out}/${name}.skel.h
    ${_cmds}
    COMMAND ${BPFTOOL} gen object ${out}/${name}.linked.o ${_objs}
    COMMAND ${BPFTOOL} gen skeleton ${out}/${name}.linked.o name ${name}_bpf > ${out}/${name}.skel.h.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${out}/${name}.skel.h.tmp ${out}/${name}.skel.h
    DEPENDS ${_deps} ${_hdrs} ${out}/vmlinux.h
    COMMENT "BPF skeleton ${name}")
  set(${out_var} ${out}/${name}.skel.h PARENT_SCOPE)
endfunction()
