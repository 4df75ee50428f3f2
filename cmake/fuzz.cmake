# libFuzzer targets (tests/fuzz/), built when the compiler is clang.
#
# Every harness is built twice:
#   fuzz_NAME_replay  with the project's compiler: runs each file of tests/fuzz/corpus/NAME/
#                     once (ctest fuzz_replay_NAME); this is what a gcc-only CI runs;
#   fuzz_NAME         with clang -fsanitize=fuzzer,address,undefined when a clang with
#                     libFuzzer is found (whatever compiler builds the rest): ctest
#                     fuzz_run_NAME fuzzes for FPGALZ4FS_FUZZ_SECONDS (default 25) seconds.
# Also the concurrency checker `race` (tests/race.c, run by tests/integration/t_race.sh)
# and the seed generator fuzz_gen_corpus (run by hand when the format changes).
set(FUZZ_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz)
set(FUZZ_HARNESSES fmt repair sb)
set(FPGALZ4FS_FUZZ_SECONDS 25 CACHE STRING "Seconds each libFuzzer ctest entry fuzzes")

foreach(h ${FUZZ_HARNESSES})
  add_executable(fuzz_${h}_replay ${FUZZ_DIR}/fuzz_${h}.c ${FUZZ_DIR}/fuzz_util.c
                 ${FUZZ_DIR}/fuzz_replay.c)
  target_include_directories(fuzz_${h}_replay PRIVATE ${FUZZ_DIR})
  target_link_libraries(fuzz_${h}_replay PRIVATE fpgalz4fs_core)
  add_test(NAME fuzz_replay_${h} COMMAND fuzz_${h}_replay ${FUZZ_DIR}/corpus/${h})
  set_tests_properties(fuzz_replay_${h} PROPERTIES TIMEOUT 300)
endforeach()

add_executable(fuzz_gen_corpus ${FUZZ_DIR}/fuzz_gen_corpus.c)
target_link_libraries(fuzz_gen_corpus PRIVATE fpgalz4fs_core)

add_executable(race tests/race.c)
target_link_libraries(race PRIVATE PkgConfig::XXHASH Threads::Threads)

# ---- libFuzzer builds: plain clang command lines, so that a gcc build gets them too ----
# Under ThreadSanitizer the fuzzers would only be built again, unchanged: skip them there.
find_program(FPGALZ4FS_CLANG NAMES clang clang-14)
set(FUZZ_HAVE_LIBFUZZER OFF)
if(FPGALZ4FS_CLANG AND NOT FPGALZ4FS_TSAN)
  set(probe ${CMAKE_BINARY_DIR}/fuzz-probe)
  file(MAKE_DIRECTORY ${probe})
  file(WRITE ${probe}/probe.c
       "#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return (int)(d && n > 99); }\n")
  execute_process(COMMAND ${FPGALZ4FS_CLANG} -fsanitize=fuzzer,address,undefined
                          ${probe}/probe.c -o ${probe}/probe
                  RESULT_VARIABLE probe_rc OUTPUT_QUIET ERROR_QUIET)
  if(probe_rc EQUAL 0)
    set(FUZZ_HAVE_LIBFUZZER ON)
  endif()
endif()
message(STATUS "libFuzzer targets: ${FUZZ_HAVE_LIBFUZZER}")

if(FUZZ_HAVE_LIBFUZZER)
  set(fuzz_cflags -std=c11 -g -O1 -fno-omit-frame-pointer -D_GNU_SOURCE
      "-DFPGALZ4FS_VERSION=\"${PROJECT_VERSION}\"" -Wall -Wextra -Werror -Wshadow
      -Wstrict-prototypes -Wno-unused-parameter -fno-sanitize-recover=all
      -I${CMAKE_SOURCE_DIR}/fs -I${CMAKE_SOURCE_DIR}/engine -I${CMAKE_SOURCE_DIR}/kernels
      -I${FUZZ_DIR})
  foreach(dir ${LZ4_INCLUDE_DIRS} ${XXHASH_INCLUDE_DIRS})
    list(APPEND fuzz_cflags -I${dir})
  endforeach()
  # the code under test: coverage-instrumented, with the sanitizers
  set(fuzz_objs "")
  foreach(src ${CORE_SOURCES} ${ENGINE_SOURCES})
    get_filename_component(abs ${src} ABSOLUTE BASE_DIR ${CMAKE_SOURCE_DIR})
    get_filename_component(stem ${abs} NAME_WE)
    set(obj ${CMAKE_BINARY_DIR}/fuzz-obj/${stem}.o)
    add_custom_command(OUTPUT ${obj}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/fuzz-obj
      COMMAND ${FPGALZ4FS_CLANG} ${fuzz_cflags} -fsanitize=fuzzer-no-link,address,undefined
              -c ${abs} -o ${obj}
      DEPENDS ${abs} IMPLICIT_DEPENDS C ${abs} VERBATIM)
    list(APPEND fuzz_objs ${obj})
  endforeach()
  foreach(h ${FUZZ_HARNESSES})
    set(bin ${CMAKE_BINARY_DIR}/fuzz_${h})
    add_custom_command(OUTPUT ${bin}
      COMMAND ${FPGALZ4FS_CLANG} ${fuzz_cflags} -fsanitize=fuzzer,address,undefined
              ${FUZZ_DIR}/fuzz_${h}.c ${FUZZ_DIR}/fuzz_util.c ${fuzz_objs}
              ${LZ4_LINK_LIBRARIES} ${XXHASH_LINK_LIBRARIES} ${CAP_LINK_LIBRARIES} -lpthread -o ${bin}
      DEPENDS ${fuzz_objs} ${FUZZ_DIR}/fuzz_${h}.c ${FUZZ_DIR}/fuzz_util.c
              ${FUZZ_DIR}/fuzz_util.h VERBATIM)
    add_custom_target(fuzz_${h}_libfuzzer ALL DEPENDS ${bin})
    # one short run per pass is enough: the sanitizer pass would repeat the same binary
    if(NOT FPGALZ4FS_SANITIZE)
      add_test(NAME fuzz_run_${h} COMMAND bash ${FUZZ_DIR}/run_fuzzer.sh ${bin}
               ${FUZZ_DIR}/corpus/${h} ${CMAKE_BINARY_DIR}/fuzz-work/${h})
      set_tests_properties(fuzz_run_${h} PROPERTIES TIMEOUT 900
        ENVIRONMENT "FUZZ_SECONDS=${FPGALZ4FS_FUZZ_SECONDS}")
    endif()
  endforeach()
endif()
