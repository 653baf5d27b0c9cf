# Installation layout and the Debian package (CPack):
#   cmake --build build --target package   ->  build/ingero_VERSION_ARCH.deb
# docs/deploy.md describes what the package holds and how it is tested
# (tests/deploy/package_test.sh).
include(GNUInstallDirs)
# `install` and cpack's preinstall step do not rebuild everything (tests included) first:
# they need only the binary and the man page, which a normal build makes. `--target package`
# still builds all.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY TRUE)

# The manual page, generated from the CLI definitions by the binary itself.
set(INGERO_MAN ${CMAKE_BINARY_DIR}/ingero.1.gz)
add_custom_command(
  OUTPUT ${INGERO_MAN}
  COMMAND $<TARGET_FILE:ingero> man-page > ${CMAKE_BINARY_DIR}/ingero.1
  COMMAND gzip -9nf ${CMAKE_BINARY_DIR}/ingero.1
  DEPENDS ingero
  COMMENT "Manual page ingero.1 from the CLI definitions")
add_custom_target(ingero_man ALL DEPENDS ${INGERO_MAN})

install(TARGETS ingero RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${INGERO_MAN} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
# Debian 12 keeps system units in /lib/systemd/system and configuration in /etc, whatever
# the install prefix.
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/ingero.service DESTINATION /lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/ingero.toml DESTINATION /etc/ingero)
file(GLOB INGERO_DOCS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${INGERO_DOCS} DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/k8s ${PROJECT_SOURCE_DIR}/deploy/prometheus
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ingero)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "ingero maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "eBPF agent for GPU debugging")
# The synopsis line is CPACK_PACKAGE_DESCRIPTION_SUMMARY; this is the extended description.
string(CONCAT CPACK_DEBIAN_PACKAGE_DESCRIPTION
  "Traces CUDA, HIP, NCCL/RCCL and RDMA calls with uprobes, and the Linux\n"
  "scheduler, memory, block I/O and TCP with BTF tracepoints, into a local SQLite\n"
  "file; explains GPU stalls, serves Prometheus metrics and an MCP server. Ships a\n"
  "systemd unit (not enabled) running `ingero trace` with /etc/ingero/ingero.toml.")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles
  ${PROJECT_SOURCE_DIR}/deploy/debian/postinst
  ${PROJECT_SOURCE_DIR}/deploy/debian/prerm
  ${PROJECT_SOURCE_DIR}/deploy/debian/postrm)
include(CPack)
