# The AM conformance suite: am_conformance runs one scenario per job; am_test
# starts the jobs through clumprun with different rank counts and settings.
add_executable(am_conformance ${CMAKE_CURRENT_LIST_DIR}/am_conformance.cpp)
target_link_libraries(am_conformance PRIVATE clump)

add_executable(am_test ${CMAKE_CURRENT_LIST_DIR}/am_test.cpp)
target_link_libraries(am_test PRIVATE GTest::gtest_main)
target_compile_definitions(am_test PRIVATE
  CLUMPRUN="$<TARGET_FILE:clumprun>"
  AM_CONFORMANCE="$<TARGET_FILE:am_conformance>"
  EXAMPLES_DIR="$<TARGET_FILE_DIR:clumprun>/../examples")
add_dependencies(am_test clumprun am_conformance)
if(CLUMP_EXAMPLES)
  add_dependencies(am_test 00_hello 01_ping_pong 02_remote_read 03_c_api)
  target_compile_definitions(am_test PRIVATE HAVE_EXAMPLES=1)
endif()
gtest_discover_tests(am_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 180 LABELS multiproc)

# The same scenarios over the network protocol and emulated nodes, with and without injected faults.
add_executable(am_net_test ${CMAKE_CURRENT_LIST_DIR}/am_net_test.cpp)
target_link_libraries(am_net_test PRIVATE GTest::gtest_main)
target_compile_definitions(am_net_test PRIVATE
  CLUMPRUN="$<TARGET_FILE:clumprun>"
  AM_CONFORMANCE="$<TARGET_FILE:am_conformance>")
add_dependencies(am_net_test clumprun am_conformance)
gtest_discover_tests(am_net_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 180 LABELS "multiproc;net")
