# clump-info: prints version, settings, limits and capacity; warns about a
# misspelt setting with the nearest name.
add_test(NAME clump_info_prints_everything COMMAND clump-info)
set_tests_properties(clump_info_prints_everything PROPERTIES LABELS tools
  PASS_REGULAR_EXPRESSION "clump [0-9]+\\.[0-9]+\\.[0-9]+.*CLUMP_SHM_QUEUE_DEPTH +1024.*AM_MaxMedium\\) +65536 bytes.*request / reply queue depth.*ranks that fit")
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
