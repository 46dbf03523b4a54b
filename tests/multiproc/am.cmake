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
  add_dependencies(am_test 00_hello 01_ping_pong 02_remote_read 03_c_api 04_gas_remote_rw 05_gas_spread_sum
                   06_gas_histogram 07_gas_store_pipeline 08_rpc_hash_table 09_coroutine_graph)
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
if(CLUMP_OFI_TESTS)
  target_compile_definitions(am_net_test PRIVATE CLUMP_HAVE_OFI=1)
endif()
gtest_discover_tests(am_net_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 180 LABELS "multiproc;net")

# The AM suite across real network namespaces (separate hosts: their own
# addresses, veth links, no shared memory between hosts). Needs root; skipped
# (77) where namespaces cannot be made.
add_test(NAME netns_am_every_kind_across_two_hosts
  COMMAND ${netns_run} -n 4 $<TARGET_FILE:am_conformance> kinds)
add_test(NAME netns_am_flood_across_three_hosts
  COMMAND ${PROJECT_SOURCE_DIR}/tests/netns/run --hosts 3 --clumprun $<TARGET_FILE:clumprun> -- -n 6 --bind none
          $<TARGET_FILE:am_conformance> flood 2000)
add_test(NAME netns_am_storm_with_netem_loss
  COMMAND ${PROJECT_SOURCE_DIR}/tests/netns/run --netem "loss 2% duplicate 1% reorder 5% delay 200us"
          --clumprun $<TARGET_FILE:clumprun> -- -n 4 --bind none $<TARGET_FILE:am_conformance> storm 500)
# The way jobs run across real machines: one clumprun agent per host, started
# over ssh (a real sshd in every namespace) or through --remote, talking to
# clumprun over TCP across the bridge.
add_test(NAME netns_am_every_kind_across_two_hosts_over_ssh
  COMMAND ${PROJECT_SOURCE_DIR}/tests/netns/run --ssh --clumprun $<TARGET_FILE:clumprun> -- -n 4 --bind none
          $<TARGET_FILE:am_conformance> kinds)
# A rank killed on one host: the others get it back unreachable and go on
# (--keep-going); the job's code is the killed rank's (137), which the
# agent reported. (The expression checks both, since it replaces the exit
# code as the verdict.)
add_test(NAME netns_am_killed_rank_across_three_hosts_through_agents
  COMMAND sh -c "\"$0\" --remote --hosts 3 --clumprun \"$1\" -- -n 3 --bind none --keep-going \"$2\" killed; \
                 code=$?; [ $code -eq 77 ] && exit 77; echo \"exit code $code\"; [ $code -eq 137 ]"
          ${PROJECT_SOURCE_DIR}/tests/netns/run $<TARGET_FILE:clumprun> $<TARGET_FILE:am_conformance>)
set_tests_properties(netns_am_every_kind_across_two_hosts netns_am_flood_across_three_hosts netns_am_storm_with_netem_loss
                     netns_am_every_kind_across_two_hosts_over_ssh netns_am_killed_rank_across_three_hosts_through_agents
  PROPERTIES LABELS "multiproc;netns;net" SKIP_RETURN_CODE 77 RESOURCE_LOCK clumpns TIMEOUT 120
             ENVIRONMENT "CLUMP_SEGMENT_SIZE=8M;CLUMP_NET_TIMEOUT_MS=1000")
set_tests_properties(netns_am_killed_rank_across_three_hosts_through_agents PROPERTIES
  PASS_REGULAR_EXPRESSION "killed peer: rank [01] got.*killed peer: rank [01] got.*exit code 137")
# The same across hosts over libfabric (CLUMP_NET=ofi), authenticated as every job across hosts is.
if(CLUMP_OFI_TESTS)
  add_test(NAME netns_am_every_kind_across_two_hosts_over_ofi_tcp
    COMMAND ${netns_run} -n 4 $<TARGET_FILE:am_conformance> kinds)
  add_test(NAME netns_am_flood_across_three_hosts_over_ofi_udp
    COMMAND ${PROJECT_SOURCE_DIR}/tests/netns/run --hosts 3 --clumprun $<TARGET_FILE:clumprun> -- -n 6 --bind none
            $<TARGET_FILE:am_conformance> flood 2000)
  add_test(NAME netns_am_killed_rank_across_three_hosts_over_ofi_tcp
    COMMAND sh -c "\"$0\" --hosts 3 --clumprun \"$1\" -- -n 3 --bind none --keep-going \"$2\" killed; \
                   code=$?; [ $code -eq 77 ] && exit 77; echo \"exit code $code\"; [ $code -eq 137 ]"
            ${PROJECT_SOURCE_DIR}/tests/netns/run $<TARGET_FILE:clumprun> $<TARGET_FILE:am_conformance>)
  set_tests_properties(netns_am_every_kind_across_two_hosts_over_ofi_tcp netns_am_killed_rank_across_three_hosts_over_ofi_tcp
    PROPERTIES LABELS "multiproc;netns;net;ofi" SKIP_RETURN_CODE 77 RESOURCE_LOCK clumpns TIMEOUT 120
               ENVIRONMENT "CLUMP_SEGMENT_SIZE=8M;CLUMP_NET_TIMEOUT_MS=1000;CLUMP_NET=ofi;FI_PROVIDER=tcp")
  set_tests_properties(netns_am_flood_across_three_hosts_over_ofi_udp
    PROPERTIES LABELS "multiproc;netns;net;ofi" SKIP_RETURN_CODE 77 RESOURCE_LOCK clumpns TIMEOUT 120
               ENVIRONMENT "CLUMP_SEGMENT_SIZE=8M;CLUMP_NET_TIMEOUT_MS=1000;CLUMP_NET=ofi;FI_PROVIDER=udp")
  set_tests_properties(netns_am_killed_rank_across_three_hosts_over_ofi_tcp PROPERTIES
    PASS_REGULAR_EXPRESSION "killed peer: rank [01] got.*killed peer: rank [01] got.*exit code 137")
endif()

# The trust suite (tests/multiproc/trust.cpp scenarios, trust_test.cpp driver):
# quiet peers are not dead, tags guard every byte, waits end when a peer dies.
add_executable(trust ${CMAKE_CURRENT_LIST_DIR}/trust.cpp)
target_link_libraries(trust PRIVATE clump)
target_include_directories(trust PRIVATE ${PROJECT_SOURCE_DIR}/src)  # the garbage scenario writes into queues itself

add_executable(trust_test ${CMAKE_CURRENT_LIST_DIR}/trust_test.cpp)
target_link_libraries(trust_test PRIVATE GTest::gtest_main)
target_compile_definitions(trust_test PRIVATE CLUMPRUN="$<TARGET_FILE:clumprun>" TRUST="$<TARGET_FILE:trust>"
                           ATTACKER="$<TARGET_FILE:datagram_attacker>")
add_dependencies(trust_test clumprun trust datagram_attacker)
if(CLUMP_OFI_TESTS)
  target_compile_definitions(trust_test PRIVATE CLUMP_HAVE_OFI=1)
endif()
gtest_discover_tests(trust_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 240 LABELS "multiproc;trust")

# A veth cut between two hosts (on the bridge's side: datagrams vanish, no
# error says so): the peer is found unreachable within the timeout.
add_test(NAME netns_a_cut_link_is_found_within_the_timeout
  COMMAND ${netns_run} -n 2 --bind none $<TARGET_FILE:trust> cut "ip -n clumpns-br link set vh1 down")
set_tests_properties(netns_a_cut_link_is_found_within_the_timeout
  PROPERTIES LABELS "multiproc;netns;net;trust" SKIP_RETURN_CODE 77 RESOURCE_LOCK clumpns TIMEOUT 60
             ENVIRONMENT "CLUMP_NET_TIMEOUT_MS=1000")
# Over libfabric too: neither provider reports the peer's loss; clump's keep-alives find it.
if(CLUMP_OFI_TESTS)
  foreach(provider tcp udp)
    add_test(NAME netns_a_cut_link_is_found_within_the_timeout_over_ofi_${provider}
      COMMAND ${netns_run} -n 2 --bind none $<TARGET_FILE:trust> cut "ip -n clumpns-br link set vh1 down")
    set_tests_properties(netns_a_cut_link_is_found_within_the_timeout_over_ofi_${provider}
      PROPERTIES LABELS "multiproc;netns;net;trust;ofi" SKIP_RETURN_CODE 77 RESOURCE_LOCK clumpns TIMEOUT 60
                 ENVIRONMENT "CLUMP_NET_TIMEOUT_MS=1000;CLUMP_NET=ofi;FI_PROVIDER=${provider}")
  endforeach()
endif()

# The exit and crash suite (tests/multiproc/exits.cpp scenarios, exits_test.cpp
# driver): every way a job ends, on shared memory, -N 2 and the net protocol.
add_executable(exits ${CMAKE_CURRENT_LIST_DIR}/exits.cpp)
target_link_libraries(exits PRIVATE clump)
add_executable(exits_test ${CMAKE_CURRENT_LIST_DIR}/exits_test.cpp)
target_include_directories(exits_test PRIVATE ${PROJECT_SOURCE_DIR}/src)  # (launcher_test_support.hpp)
target_link_libraries(exits_test PRIVATE GTest::gtest_main)
target_compile_definitions(exits_test PRIVATE CLUMPRUN="$<TARGET_FILE:clumprun>" BOOT_PROBE="$<TARGET_FILE:boot_probe>"
                           EXITS="$<TARGET_FILE:exits>")
add_dependencies(exits_test clumprun exits)
gtest_discover_tests(exits_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120 LABELS "multiproc;exits")

# Long messages into malloc'd segments where the kernel refuses part of the
# cross-memory traffic: rank 0 makes itself undumpable and the job runs as
# nobody, so nobody may write into rank 0 (the ring instead) and no receiver
# may pull a shared copy's rest from it (rank 0 then writes all of it).
# Under TSan, beside another test on 2 cores, the job takes over 60 s.
if(CLUMP_SANITIZE)
  set(nobody_timeout 200)
else()
  set(nobody_timeout 60)
endif()
add_test(NAME am_private_segments_where_the_kernel_refuses_cross_memory_attach
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/as_nobody $<TARGET_FILE:clumprun>
          "the kernel refuses cross-memory attach into rank 0"
          "could not pull a long message's rest from rank 0's memory (the kernel refuses)"
          -- -n 3 --timeout ${nobody_timeout} $<TARGET_FILE:am_conformance> private_undumpable)
math(EXPR nobody_ctest_timeout "${nobody_timeout} + 60")
set_tests_properties(am_private_segments_where_the_kernel_refuses_cross_memory_attach
  PROPERTIES TIMEOUT ${nobody_ctest_timeout} SKIP_RETURN_CODE 77 LABELS multiproc)
