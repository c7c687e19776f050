# Helpers that keep every layer's CMakeLists.txt to one call.
#
# dsh_library(NAME
#   SOURCES a.cc b.cc            # the library (dsh_NAME), warnings are errors
#   DEPS dsh_base Boost::boost   # public link dependencies
#   TESTS a_test.cc b_test.cc    # one test binary per library: NAME_test
#   TEST_DEPS ...)               # extra link dependencies of the test binary
# Tests are registered with CTest one GoogleTest case at a time.

set(DSH_WARNINGS -Wall -Wextra -Wpedantic -Werror -Wnon-virtual-dtor -Wimplicit-fallthrough
    -Wno-missing-field-initializers)

include(GoogleTest)

function(dsh_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS;TESTS;TEST_DEPS" ${ARGN})
  add_library(dsh_${name} STATIC ${A_SOURCES})
  target_include_directories(dsh_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(dsh_${name} PUBLIC ${A_DEPS})
  target_compile_options(dsh_${name} PRIVATE ${DSH_WARNINGS})
  if(A_TESTS)
    dsh_test(${name}_test SOURCES ${A_TESTS} DEPS dsh_${name} ${A_TEST_DEPS})
  endif()
endfunction()

function(dsh_test name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_options(${name} PRIVATE ${DSH_WARNINGS})
  target_precompile_headers(${name} PRIVATE <gtest/gtest.h> <nlohmann/json.hpp> <string> <vector>)
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST
    PROPERTIES ENVIRONMENT "DSH_BUILD_DIR=${PROJECT_BINARY_DIR};DSH_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()
