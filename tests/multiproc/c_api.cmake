# C API (c_api_conformance)
# A plain C program that checks clump/am.h against AM2-API.md; run here as
# jobs of 2 and 3 ranks through clumprun (a GoogleTest driver may run it too).
add_executable(c_api_conformance ${CMAKE_CURRENT_LIST_DIR}/c_api_conformance.c)
target_link_libraries(c_api_conformance PRIVATE clump)
add_test(NAME c_api_n2 COMMAND $<TARGET_FILE:clumprun> -n 2 --timeout 50 $<TARGET_FILE:c_api_conformance>)
add_test(NAME c_api_n3 COMMAND $<TARGET_FILE:clumprun> -n 3 --timeout 50 $<TARGET_FILE:c_api_conformance>)
# AMX_SPMDExit ends the whole job with its code after the exit callback;
# AMX_FatalErr aborts (128 + SIGABRT) with its message.
add_test(NAME c_api_exit_n3 COMMAND sh -c
  "out=$(\"$0\" -n 3 --timeout 50 \"$1\" --exit 7 2>&1); code=$?; echo \"$out\"; test $code -eq 7 && echo \"$out\" | grep -q 'rank 2: exit callback ran with 7'"
  $<TARGET_FILE:clumprun> $<TARGET_FILE:c_api_conformance>)
add_test(NAME c_api_fatal_n2 COMMAND sh -c
  "out=$(\"$0\" -n 2 --timeout 50 \"$1\" --fatal 2>&1); code=$?; echo \"$out\"; test $code -eq 134 && echo \"$out\" | grep -q 'AMX_FatalErr: rank 1 gives up (as asked)'"
  $<TARGET_FILE:clumprun> $<TARGET_FILE:c_api_conformance>)
# The same over the network: two emulated nodes, and every rank over UDP.
add_test(NAME c_api_n3_two_nodes COMMAND $<TARGET_FILE:clumprun> -n 3 -N 2 --timeout 50 $<TARGET_FILE:c_api_conformance>)
add_test(NAME c_api_n2_net COMMAND $<TARGET_FILE:clumprun> -n 2 --timeout 50 $<TARGET_FILE:c_api_conformance>)
set_tests_properties(c_api_n2_net PROPERTIES ENVIRONMENT "CLUMP_PROTOCOL=net")
# Long messages into malloc'd segments through the staging ring, as where the
# kernel refuses cross-memory attach.
add_test(NAME c_api_n3_ring COMMAND $<TARGET_FILE:clumprun> -n 3 --timeout 50 $<TARGET_FILE:c_api_conformance>)
set_tests_properties(c_api_n3_ring PROPERTIES ENVIRONMENT "CLUMP_CMA_MAX=0")
set_tests_properties(c_api_n2 c_api_n3 c_api_exit_n3 c_api_fatal_n2 c_api_n3_two_nodes c_api_n2_net c_api_n3_ring
  PROPERTIES TIMEOUT 60 LABELS multiproc)
# Over libfabric (CLUMP_NET=ofi), with both providers here.
if(LIBFABRIC_FOUND)
  if(CLUMP_OFI_TESTS)
    set(providers tcp udp)
  else()
    set(providers tcp)  # the sanitizers' smoke test
  endif()
  foreach(provider ${providers})
    add_test(NAME c_api_n3_two_nodes_ofi_${provider}
      COMMAND $<TARGET_FILE:clumprun> -n 3 -N 2 --timeout 50 $<TARGET_FILE:c_api_conformance>)
    set_tests_properties(c_api_n3_two_nodes_ofi_${provider} PROPERTIES TIMEOUT 60 LABELS "multiproc;ofi"
                         ENVIRONMENT "CLUMP_NET=ofi;FI_PROVIDER=${provider}")
  endforeach()
endif()
