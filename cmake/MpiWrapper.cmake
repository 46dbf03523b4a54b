# clump_find_mpi_wrapper(VAR WRAPPER DOC): VAR is the path of the MPI compiler
# wrapper WRAPPER (mpicc.openmpi, mpicxx.openmpi, ...) when it can compile a
# program that includes mpi.h, else empty. The wrapper comes with the MPI's
# runtime package (openmpi-bin), its mpi.h with the -dev package: the launcher
# tests install the runtime alone, and a wrapper without its header must not
# make a peer that fails to build.
function(clump_find_mpi_wrapper var wrapper doc)
  find_program(${var}_PROGRAM NAMES ${wrapper} DOC "${doc}")
  set(usable "")
  if(${var}_PROGRAM)
    set(probe ${CMAKE_CURRENT_BINARY_DIR}/${wrapper}_probe.c)
    file(WRITE ${probe} "#include <mpi.h>\nint main(void) { return MPI_Init(0, 0); }\n")
    execute_process(COMMAND ${${var}_PROGRAM} -fsyntax-only -x c ${probe}
                    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      set(usable ${${var}_PROGRAM})
    endif()
  endif()
  set(${var} "${usable}" PARENT_SCOPE)
endfunction()
