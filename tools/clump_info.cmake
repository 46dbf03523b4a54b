# clump-info: version, settings, limits and this node's shared-memory capacity.
find_package(CLI11 CONFIG REQUIRED)
find_package(fmt REQUIRED)
add_executable(clump-info ${CMAKE_CURRENT_LIST_DIR}/clump-info.cpp)
target_include_directories(clump-info PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(clump-info PRIVATE CLUMP_VERSION="${PROJECT_VERSION}")
target_link_libraries(clump-info PRIVATE clump CLI11::CLI11 fmt::fmt)
set_target_properties(clump-info PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS clump-info RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
