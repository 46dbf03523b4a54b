# clumprun: the job launcher. tools/clumprun.cpp is the command line; the
# pieces are in tools/clumprun/. It may use CLI11, fmt and hwloc (libclump may
# not), and the private boot headers of src/ for the wire protocol.
find_package(CLI11 CONFIG REQUIRED)
find_package(fmt REQUIRED)
find_package(PkgConfig REQUIRED)
if(NOT TARGET PkgConfig::HWLOC)
  pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
endif()

add_executable(clumprun
  ${CMAKE_CURRENT_LIST_DIR}/clumprun.cpp
  ${CMAKE_CURRENT_LIST_DIR}/clumprun/binding.cpp
  ${CMAKE_CURRENT_LIST_DIR}/clumprun/handshake.cpp
  ${CMAKE_CURRENT_LIST_DIR}/clumprun/launcher.cpp
  ${CMAKE_CURRENT_LIST_DIR}/clumprun/nodes.cpp
  ${CMAKE_CURRENT_LIST_DIR}/clumprun/output.cpp
  ${CMAKE_CURRENT_LIST_DIR}/clumprun/preflight.cpp
  ${CMAKE_CURRENT_LIST_DIR}/clumprun/remote.cpp
  ${CMAKE_CURRENT_LIST_DIR}/clumprun/rendezvous.cpp)
target_include_directories(clumprun PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(clumprun PRIVATE clump CLI11::CLI11 fmt::fmt PkgConfig::HWLOC)
if(SODIUM_FOUND)  # the agents' handshake (clumprun/handshake.cpp)
  target_link_libraries(clumprun PRIVATE PkgConfig::SODIUM)
  target_compile_definitions(clumprun PRIVATE CLUMP_HAVE_SODIUM=1)
endif()
# Installed next to libclump: find it relative to the binary, wherever the
# prefix is.
set_target_properties(clumprun PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS clumprun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
