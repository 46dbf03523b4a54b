# clump-info: prints version, settings, limits and capacity; warns about a
# misspelt setting with the nearest name.
add_test(NAME clump_info_prints_everything COMMAND clump-info)
set_tests_properties(clump_info_prints_everything PROPERTIES LABELS tools
  PASS_REGULAR_EXPRESSION "clump [0-9]+\\.[0-9]+\\.[0-9]+.*CLUMP_SHM_QUEUE_DEPTH +1024.*medium payload +65536 bytes \\(CLUMP_MAX_MEDIUM; AM_MaxMedium\\(\\) is 65000\\).*request / reply queue depth.*ranks that fit")
add_test(NAME clump_info_reads_settings COMMAND ${CMAKE_COMMAND} -E env CLUMP_SHM_QUEUE_DEPTH=64 $<TARGET_FILE:clump-info> --limits)
set_tests_properties(clump_info_reads_settings PROPERTIES LABELS tools
  PASS_REGULAR_EXPRESSION "request / reply queue depth +64 packets")
add_test(NAME clump_info_warns_about_a_misspelt_setting
  COMMAND ${CMAKE_COMMAND} -E env CLUMP_SHM_QUEUE_DEPHT=64 $<TARGET_FILE:clump-info> --limits)
set_tests_properties(clump_info_warns_about_a_misspelt_setting PROPERTIES LABELS tools
  PASS_REGULAR_EXPRESSION "unknown setting CLUMP_SHM_QUEUE_DEPHT ignored; did you mean CLUMP_SHM_QUEUE_DEPTH")
add_test(NAME clump_info_refuses_a_bad_value
  COMMAND ${CMAKE_COMMAND} -E env CLUMP_SHM_QUEUE_DEPTH=1000 $<TARGET_FILE:clump-info> --limits)
set_tests_properties(clump_info_refuses_a_bad_value PROPERTIES LABELS tools
  PASS_REGULAR_EXPRESSION "CLUMP_SHM_QUEUE_DEPTH=1000 must be a power of two")
# docs/settings.md is generated from the registry and must not drift from it.
add_test(NAME docs_settings_md_matches_the_registry
  COMMAND sh -c "\"$0\" --settings-markdown | diff -u \"$1\" -" $<TARGET_FILE:clump-info> ${PROJECT_SOURCE_DIR}/docs/settings.md)
set_tests_properties(docs_settings_md_matches_the_registry PROPERTIES LABELS tools)
# clump-info with SETTINGS (space-separated NAME=VALUE) and ARGS exits 1 and
# says MESSAGE (an extended regular expression).
function(clump_info_fails name settings args message)
  add_test(NAME ${name}
    COMMAND sh -c "out=$(env $0 \"$1\" $2 2>&1); code=$?; echo \"$out\"; test $code -eq 1 && echo \"$out\" | grep -Eq \"$3\""
            ${settings} $<TARGET_FILE:clump-info> "${args}" ${message})
  set_tests_properties(${name} PROPERTIES LABELS tools)
endfunction()
# The same for a case "SETTING|MESSAGE", named PREFIX and the setting, with
# the settings in ALSO too.
function(clump_info_fails_case prefix also args case)
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 setting)
  list(GET parts 1 message)
  string(MAKE_C_IDENTIFIER "${setting}" id)
  clump_info_fails(${prefix}${id} "${also} ${setting}" "${args}" "${message}")
endfunction()
# Sizes and integers out of range are refused (exit 1, the setting named),
# never wrapped or cut to fit: -1 is not 2^64 - 1, 2^32 is not 0.
foreach(bad "CLUMP_SEGMENT_SIZE=-1|CLUMP_SEGMENT_SIZE=-1 is not a size"
            "CLUMP_GAS_SEGMENT=-4096|CLUMP_GAS_SEGMENT=-4096 is not a size"
            "CLUMP_SEGMENT_SIZE=100T|CLUMP_SEGMENT_SIZE=100T is out of range"
            "CLUMP_POLL_BATCH=4294967296|CLUMP_POLL_BATCH=4294967296 is out of range"
            "CLUMP_SHM_QUEUE_DEPTH=99999999999999999999|CLUMP_SHM_QUEUE_DEPTH=99999999999999999999 is out of range"
            "CLUMP_NET_WINDOW=-1|CLUMP_NET_WINDOW=-1 is out of range"
            "CLUMP_NET_TIMEOUT_MS=5|CLUMP_NET_TIMEOUT_MS=5 must be 0 \\(never\\) or between 100"
            "CLUMP_JOIN_TIMEOUT_S=0|CLUMP_JOIN_TIMEOUT_S=0 is out of range"
            "CLUMP_NET_FAULT=delay_us=-1|delay_us=-1 is not a whole number"
            "CLUMP_NET=tcp|CLUMP_NET=tcp must be udp, ofi or auto"
            "CLUMP_OFI_MTU=511|CLUMP_OFI_MTU=511 is out of range"
            "CLUMP_OFI_MTU=17M|CLUMP_OFI_MTU=17M is out of range"
            "CLUMP_OFI_MTU=-1|CLUMP_OFI_MTU=-1 is not a size")
  clump_info_fails_case(clump_info_refuses_ "" "--limits" "${bad}")
endforeach()
# clump-info lists libfabric's reliable-datagram providers (here, with
# Debian's libfabric, tcp;ofi_rxm among them) and names the network a job
# would use between nodes (CLUMP_NET): UDP unless asked, since only socket
# emulations are here.
add_test(NAME clump_info_lists_the_libfabric_providers COMMAND clump-info)
if(LIBFABRIC_FOUND)
  set_tests_properties(clump_info_lists_the_libfabric_providers PROPERTIES LABELS tools
    PASS_REGULAR_EXPRESSION "libfabric: libfabric 1\\.[0-9]+; reliable-datagram providers: [^\n]*tcp.ofi_rxm[^\n]*\nnetwork between nodes \\(CLUMP_NET=auto\\): udp\n")
  # CLUMP_NET=ofi: the provider FI_PROVIDER names, at the address CLUMP_NET_ADDRESS names.
  # Whether payloads go by RMA reads (tcp;ofi_rxm: from 32 KiB; udp;ofi_rxd:
  # only when asked). udp;ofi_rxd comes with its caution (stray datagrams crash it).
  foreach(provider "tcp|tcp.ofi_rxm|\n  medium and long payloads of 32768 bytes and more read by their destination .RMA"
                   "udp|udp.ofi_rxd|\n  payloads in datagrams .this provider.s reads pay only when CLUMP_OFI_RMA_MIN is set.\n  udp.ofi_rxd is libfabric's emulation for testing: stray datagrams")
    string(REPLACE "|" ";" parts "${provider}")
    list(GET parts 0 name)
    list(GET parts 1 full)
    list(GET parts 2 then)
    add_test(NAME clump_info_names_the_ofi_network_over_${name}
      COMMAND ${CMAKE_COMMAND} -E env CLUMP_NET=ofi FI_PROVIDER=${name} CLUMP_NET_ADDRESS=127.0.0.1 $<TARGET_FILE:clump-info>)
    set_tests_properties(clump_info_names_the_ofi_network_over_${name} PROPERTIES LABELS tools
      PASS_REGULAR_EXPRESSION "network between nodes \\(CLUMP_NET=ofi\\): ofi ${full} at fi_sockaddr_in://127\\.0\\.0\\.1:[0-9]+ \\(lo\\)${then}")
  endforeach()
  # What cannot be had is said, with what there is, and clump-info fails.
  foreach(bad "FI_PROVIDER=nosuch|no libfabric provider offers reliable datagram endpoints with FI_PROVIDER=nosuch"
              "CLUMP_OFI_DOMAIN=nosuch|no domain nosuch among the reliable datagram endpoints .*tcp.ofi_rxm lo")
    clump_info_fails_case(clump_info_says_why_ofi_cannot_be_opened_ "CLUMP_NET=ofi" "" "${bad}")
  endforeach()
  # udp;ofi_rxd's window set to what it silently takes as none.
  foreach(bad "FI_OFI_RXD_MAX_UNACKED=0" "FI_OFI_RXD_MAX_UNACKED=-1" "FI_OFI_RXD_MAX_UNACKED=abc")
    clump_info_fails_case(clump_info_refuses_a_dead_rxd_window_ "CLUMP_NET=ofi FI_PROVIDER=udp" ""
                          "${bad}|${bad} must be a number of packets from 1 to 1048576")
  endforeach()
else()
  set_tests_properties(clump_info_lists_the_libfabric_providers PROPERTIES LABELS tools
    PASS_REGULAR_EXPRESSION "libfabric: not available; reliable-datagram providers: none \\(built without libfabric")
endif()
